package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
)

// unit says how a figure's samples are summarised.
type unit int

const (
	// latency figures are durations, reported in µs.
	latency unit = iota
	// throughput figures are bytes over a duration, reported in MiB/s.
	throughput
)

// sampler takes one sample: how long it took and, for throughput figures,
// how many bytes reached the client.
type sampler func(ctx context.Context) (time.Duration, int64, error)

// figure is one measured quantity and its samples.
type figure struct {
	id      string // stable key, e.g. "bash_true/landlock"
	label   string
	sandbox string // "" for floors
	unit    unit
	n, warm int
	sample  sampler
	pids    []int // the other processes a sample makes work (servers)
	// results
	cpu     time.Duration // CPU time of all samples, every process included
	took    []time.Duration
	bytes   []int64
	dropped int64 // Progress bytes toolsvc said it did not deliver
	// produced is the output of the command of each sample (stream only),
	// whether or not it reached the client.
	produced int64
}

// plan is the configuration of one run.
type plan struct {
	n, warm, rounds        int
	streamN, startN, idleN int
	rng                    *rand.Rand
	progress               io.Writer // round-by-round notes; io.Discard for none
}

// runRounds warms every figure up, then takes their samples in p.rounds
// rounds, each round visiting every figure once in a new random order and
// taking that figure's share of samples.
func runRounds(ctx context.Context, p plan, figs []*figure) error {
	fmt.Fprintf(p.progress, "toolbench: warm-up\n")
	for _, f := range figs {
		for range f.warm {
			if _, _, err := f.sample(ctx); err != nil {
				return fmt.Errorf("%s (warm-up): %w", f.id, err)
			}
		}
		f.dropped = 0
	}
	for r := range p.rounds {
		fmt.Fprintf(p.progress, "toolbench: round %d/%d (load %s)\n", r+1, p.rounds, loadAvg())
		for _, i := range p.rng.Perm(len(figs)) {
			f := figs[i]
			for range share(f.n, p.rounds, r) {
				cpu0, err := cpuTime(f.pids)
				if err != nil {
					return err
				}
				took, n, err := f.sample(ctx)
				if err != nil {
					return fmt.Errorf("%s: %w", f.id, err)
				}
				cpu1, err := cpuTime(f.pids)
				if err != nil {
					return err
				}
				f.cpu += cpu1 - cpu0
				f.took = append(f.took, took)
				f.bytes = append(f.bytes, n)
			}
		}
	}
	return nil
}

// share is how many of n samples round r of rounds takes.
func share(n, rounds, r int) int {
	return n*(r+1)/rounds - n*r/rounds
}

// floorFigures returns the floors (bare gRPC against the echo server, bare
// os/exec spawns) and the references (the least a Read, a Bash stream and
// an abort can do, served by the echo server) over transport t. The tuned
// transport gives the gRPC floors, the Read and stream references and the
// head reference only, with "_tuned" appended to their ids; spawns do not
// depend on it, nor does an abort's one small message each way (abort is
// nil then).
func floorFigures(p plan, t transport, echoPid int, ping *pingStream, readFile *readFileStream, abort *abortStream, echo *grpc.ClientConn) []*figure {
	id, note := func(s string) string { return s }, ""
	if t.tuned {
		id = func(s string) string { return s + tunedSuffix }
		reuse := ""
		if t.ReuseBuffers {
			reuse = ", buffers reused uncleared"
		}
		note = fmt.Sprintf(" (tuned: windows %d/%d MiB, buffers %d KiB, %d KiB messages and reads, pipe %d MiB%s)",
			t.StreamWindow>>20, t.ConnWindow>>20, t.ReadBuffer>>10, t.chunk>>10, t.pipeSize>>20, reuse)
	}
	figs := []*figure{
		{id: id("floor_grpc_pingpong"), label: "floor: bare gRPC bidi ping-pong, 1 KiB each way" + note, unit: latency, n: p.n, warm: p.warm, pids: []int{echoPid},
			sample: func(context.Context) (time.Duration, int64, error) {
				d, err := ping.roundTrip()
				return d, 0, err
			}},
		{id: id("floor_grpc_stream_64mib"), label: fmt.Sprintf("floor: bare gRPC server stream, 64 MiB in %d KiB messages", t.chunk>>10) + note, unit: throughput, n: p.streamN, warm: 1, pids: []int{echoPid},
			sample: func(ctx context.Context) (time.Duration, int64, error) {
				return floodOnce(ctx, echo, methodFlood)
			}},
		{id: id("floor_exec_head_64mib"), label: "reference: os/exec `head -c 64MiB /dev/zero`, stdout read through a pipe" + note, unit: throughput, n: p.streamN, warm: 1,
			sample: func(ctx context.Context) (time.Duration, int64, error) {
				return headOnce(ctx, t)
			}},
		{id: id(refRead), label: "reference: bare gRPC ping-pong, the server reads the 1 KiB file and numbers its lines" + note, unit: latency, n: p.n, warm: p.warm, pids: []int{echoPid},
			sample: func(context.Context) (time.Duration, int64, error) {
				d, err := readFile.roundTrip()
				return d, 0, err
			}},
		{id: id(refStream), label: "reference: bare gRPC stream of `head -c 64MiB /dev/zero`'s stdout, sent as read from the pipe" + note, unit: throughput, n: p.streamN, warm: 1, pids: []int{echoPid},
			sample: func(ctx context.Context) (time.Duration, int64, error) {
				return floodOnce(ctx, echo, methodExecFlood)
			}},
		{id: id(refStreamSaved), label: "reference: bare gRPC stream of `head -c 64MiB /dev/zero`'s stdout, each read also written to a file, then sent" + note, unit: throughput, n: p.streamN, warm: 1, pids: []int{echoPid},
			sample: func(ctx context.Context) (time.Duration, int64, error) {
				return floodOnce(ctx, echo, methodExecFloodSaved)
			}},
	}
	if t.tuned {
		return figs
	}
	return append(figs,
		&figure{id: "floor_exec_bash_true", label: "floor: os/exec `bash -c true`, output captured", unit: latency, n: p.n, warm: p.warm,
			sample: bashTrueSample},
		&figure{id: "floor_exec_bash_true_x32", label: "floor: 32 os/exec `bash -c true` at once, batch wall", unit: latency, n: p.n, warm: p.warm,
			sample: func(ctx context.Context) (time.Duration, int64, error) {
				d, err := timeBashTrueN(ctx, 32)
				return d, 0, err
			}},
		&figure{id: "floor_exec_bash_true_idle", label: "floor: os/exec `bash -c true` 100 ms after the one before, output captured", unit: latency, n: p.idleN, warm: 1,
			sample: afterIdle(bashTrueSample)},
		&figure{id: refAbort, label: "reference: bare gRPC ping-pong, the server kills the `sleep 30` it started (seen in /proc) and answers; a goroutine reaps it", unit: latency, n: p.n, warm: p.warm, pids: []int{echoPid},
			sample: func(ctx context.Context) (time.Duration, int64, error) {
				d, err := abort.abortOnce(ctx, echoPid)
				return d, 0, err
			}})
}

// bashTrueSample takes one sample of the os/exec `bash -c true` floor.
func bashTrueSample(ctx context.Context) (time.Duration, int64, error) {
	d, err := timeBashTrue(ctx)
	return d, 0, err
}

// idleGap is how long an after-idle figure waits before each sample: a
// call of a conversation follows the model's answer, not the call before.
const idleGap = 100 * time.Millisecond

// afterIdle waits idleGap, then takes sample s.
func afterIdle(s sampler) sampler {
	return func(ctx context.Context) (time.Duration, int64, error) {
		select {
		case <-time.After(idleGap):
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		return s(ctx)
	}
}

// toolsvcFigures returns the figures of one running toolsvc. The sessions
// it opens are added to *sessions for the caller to close.
func toolsvcFigures(ctx context.Context, p plan, svc *toolsvcProc, root string, sessions *[]*session) ([]*figure, error) {
	openWith := func(opts *executorv1.SessionOptions) (*session, error) {
		s, err := openSessionWith(ctx, svc, opts)
		if err != nil {
			return nil, err
		}
		*sessions = append(*sessions, s)
		return s, nil
	}
	open := func() (*session, error) { return openWith(nil) }
	readS, err := open()
	if err != nil {
		return nil, err
	}
	// The orchestrator opens its sessions with the lifecycle folded.
	foldedS, err := openWith(&executorv1.SessionOptions{Lifecycle: executorv1.Lifecycle_LIFECYCLE_FOLDED})
	if err != nil {
		return nil, err
	}
	bashS, err := open()
	if err != nil {
		return nil, err
	}
	batchS, err := open()
	if err != nil {
		return nil, err
	}
	abortS, err := open()
	if err != nil {
		return nil, err
	}
	idleS, err := open()
	if err != nil {
		return nil, err
	}
	file, err := writeKiBFile(root)
	if err != nil {
		return nil, err
	}
	sb := svc.sandbox
	suffix := " (sandbox " + sb + ")"
	pids := []int{svc.cmd.Process.Pid}
	stream := &figure{id: "bash_stream_64mib/" + sb, label: "Bash `head -c 64MiB /dev/zero`, stdout as Progress" + suffix,
		sandbox: sb, unit: throughput, n: p.streamN, warm: 1, produced: streamBytes, pids: pids}
	stream.sample = func(ctx context.Context) (time.Duration, int64, error) {
		return streamSample(ctx, svc, stream)
	}
	return []*figure{
		{id: "read_1kib/" + sb, pids: pids, label: "Read of a 1 KiB file" + suffix, sandbox: sb, unit: latency, n: p.n, warm: p.warm,
			sample: readSample(readS, file)},
		{id: "read_1kib_folded/" + sb, pids: pids, label: "Read of a 1 KiB file, lifecycle folded: the Result alone, as the orchestrator gets it" + suffix,
			sandbox: sb, unit: latency, n: p.n, warm: p.warm, sample: readSample(foldedS, file)},
		{id: "bash_true/" + sb, pids: pids, label: "Bash `true`" + suffix, sandbox: sb, unit: latency, n: p.n, warm: p.warm,
			sample: bashSample(bashS)},
		{id: "bash_true_idle/" + sb, pids: pids, label: "Bash `true` 100 ms after the call before" + suffix, sandbox: sb, unit: latency, n: p.idleN, warm: 1,
			sample: afterIdle(bashSample(idleS))},
		{id: "bash_true_x32/" + sb, pids: pids, label: "32 Bash `true` in one message, batch wall" + suffix, sandbox: sb, unit: latency, n: p.n, warm: p.warm,
			sample: batchSample(batchS, 32)},
		stream,
		{id: "abort_sleep/" + sb, pids: pids, label: "Abort of a running `sleep 30` (seen in /proc) to its Result" + suffix, sandbox: sb, unit: latency, n: p.n, warm: p.warm,
			sample: abortSample(abortS, svc.cmd.Process.Pid, true)},
		{id: "abort_start/" + sb, pids: pids, label: "Abort 2 ms after Started of `sleep 30` to its Result" + suffix, sandbox: sb, unit: latency, n: p.n, warm: p.warm,
			sample: abortSample(abortS, svc.cmd.Process.Pid, false)},
	}, nil
}

// startupFigure measures process start to SERVING for fresh toolsvc
// processes, each stopped again after its sample.
func startupFigure(p plan, bin, sb string, w *workDir, grpcDefaults bool) (*figure, error) {
	root, err := w.workspace("start-" + sb)
	if err != nil {
		return nil, err
	}
	return &figure{id: "startup_serving/" + sb, label: "toolsvc process start to SERVING health (sandbox " + sb + ")",
		sandbox: sb, unit: latency, n: p.startN, warm: 1,
		sample: func(ctx context.Context) (time.Duration, int64, error) {
			svc, took, err := startToolsvc(ctx, bin, sb, root, w, grpcDefaults)
			if err != nil {
				return 0, 0, err
			}
			if err := svc.stop(); err != nil {
				return 0, 0, err
			}
			return took, 0, nil
		}}, nil
}

// The reference figures: what the least implementation of a Read and of a
// Bash stream reaches, with no executor around it. refStreamSaved is the
// least Bash stream that keeps the whole output, as a Bash call must.
const (
	refRead        = "ref_grpc_read_1kib"
	refStream      = "ref_grpc_exec_stream_64mib"
	refStreamSaved = "ref_grpc_exec_stream_64mib_saved"
	refAbort       = "ref_grpc_abort_sleep"
)

// tunedSuffix ends the id of a floor or reference measured over the tuned
// transport.
const tunedSuffix = "_tuned"

// writeKiBFile writes the 1 KiB file the Read figure reads: 16 lines of 64
// bytes.
func writeKiBFile(root string) (string, error) {
	line := strings.Repeat("toolbench", 7) + "\n" // 64 bytes
	path := filepath.Join(root, "one-kib.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat(line, 16)), 0o644); err != nil {
		return "", fmt.Errorf("write read fixture: %w", err)
	}
	return path, nil
}

// readSample reads the file, alternating between two ranges so that no read
// is answered with the "unchanged since last read" stub.
func readSample(s *session, path string) sampler {
	inputs := []string{
		fmt.Sprintf(`{"file_path":%q}`, path),
		fmt.Sprintf(`{"file_path":%q,"offset":1,"limit":16}`, path),
	}
	i := 0
	return func(context.Context) (time.Duration, int64, error) {
		in := inputs[i%2]
		i++
		start := time.Now()
		id, err := s.send(s.newMessageID(), "Read", in)
		if err != nil {
			return 0, 0, err
		}
		r, err := s.result(id, nil)
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		if text := resultText(r); r.GetIsError() || len(text) < 1024 {
			return 0, 0, fmt.Errorf("the Read call returned %d bytes (is_error %v): %.200q", len(text), r.GetIsError(), text)
		}
		return took, 0, nil
	}
}

// bashSample runs Bash `true` and waits for its Result.
func bashSample(s *session) sampler {
	return func(context.Context) (time.Duration, int64, error) {
		start := time.Now()
		id, err := s.send(s.newMessageID(), "Bash", `{"command":"true"}`)
		if err != nil {
			return 0, 0, err
		}
		r, err := s.result(id, nil)
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		if r.GetIsError() {
			return 0, 0, fmt.Errorf("the Bash call `true` failed: %s", resultText(r))
		}
		return took, 0, nil
	}
}

// batchSample sends n Bash `true` of one assistant message and waits for
// all n Results. It fails if toolsvc does not treat them as safe to run in
// parallel, since the figure would then measure a serial queue.
func batchSample(s *session, n int) sampler {
	return func(context.Context) (time.Duration, int64, error) {
		msg := s.newMessageID()
		ids := make([]string, 0, n)
		start := time.Now()
		for range n {
			id, err := s.send(msg, "Bash", `{"command":"true"}`)
			if err != nil {
				return 0, 0, err
			}
			ids = append(ids, id)
		}
		rs, err := s.results(ids, func(ev *executorv1.ExecuteResponse) error {
			if a := ev.GetAccepted(); a != nil && !a.GetConcurrencySafe() {
				return fmt.Errorf("toolsvc queued Bash true (%s) as not concurrency-safe", a.GetToolUseId())
			}
			return nil
		})
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		for _, r := range rs {
			if r.GetIsError() {
				return 0, 0, fmt.Errorf("the Bash call `true` failed: %s", resultText(r))
			}
		}
		return took, 0, nil
	}
}

// abortSample times Abort to Result for a Bash `sleep 30`. With running
// set, the sample starts once a `sleep` process below the toolsvc (pid
// svcPid) exists, so a running sleep under its bash is killed; otherwise
// it starts 2 ms after the Started event, as BenchmarkAbortSleep of
// pkg/execgrpc does, which on a loaded machine often aborts a bash that has
// not yet started sleep.
func abortSample(s *session, svcPid int, running bool) sampler {
	return func(ctx context.Context) (time.Duration, int64, error) {
		id, err := s.send(s.newMessageID(), "Bash", `{"command":"sleep 30"}`)
		if err != nil {
			return 0, 0, err
		}
		if err := s.waitStarted(id); err != nil {
			return 0, 0, err
		}
		if running {
			err = waitDescendant(ctx, svcPid, "sleep")
		} else {
			time.Sleep(2 * time.Millisecond)
		}
		if err != nil {
			return 0, 0, err
		}
		start := time.Now()
		if err := s.abort(id); err != nil {
			return 0, 0, err
		}
		r, err := s.result(id, nil)
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		if r.GetOutcome() != executorv1.Outcome_OUTCOME_INTERRUPTED {
			return 0, 0, fmt.Errorf("aborted call ended with %v: %s", r.GetOutcome(), resultText(r))
		}
		return took, 0, nil
	}
}

// waitDescendant polls /proc until a process named comm runs below pid.
func waitDescendant(ctx context.Context, pid int, comm string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if found, err := hasDescendant(pid, comm); err != nil || found {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s process below pid %d after 30s", comm, pid)
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// hasDescendant reports whether a process named comm (not a zombie) runs
// below pid.
func hasDescendant(pid int, comm string) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("list processes: %w", err)
	}
	parent := make(map[int]int, len(entries))
	var named []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ...
		open, close := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(string(b[close+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[p] = ppid
		if string(b[open+1:close]) == comm && f[0] != "Z" {
			named = append(named, p)
		}
	}
	for _, p := range named {
		for q, n := parent[p], 0; q > 1 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				return true, nil
			}
		}
	}
	return false, nil
}

// streamSample runs `head -c 64MiB /dev/zero` in a session of its own (so
// the session's scratch copy of the output is removed after each sample)
// and times ToolUse to Result. It returns the bytes that reached the client
// in Progress events; those toolsvc reports dropped are added to f.dropped.
// The command must have produced all 64 MiB (Progress total_bytes), but not
// all of it need reach the client: toolsvc's Progress is for display and
// may skip output, and the figure then shows it.
func streamSample(ctx context.Context, svc *toolsvcProc, f *figure) (time.Duration, int64, error) {
	s, err := openSession(ctx, svc)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	id, err := s.send(s.newMessageID(), "Bash", fmt.Sprintf(`{"command":"head -c %d /dev/zero"}`, streamBytes))
	if err != nil {
		_ = s.close()
		return 0, 0, err
	}
	var got, dropped int64
	var total uint64
	r, err := s.result(id, func(ev *executorv1.ExecuteResponse) error {
		if p := ev.GetProgress(); p != nil && p.GetToolUseId() == id {
			got += int64(len(p.GetOutput()))
			dropped += int64(p.GetDroppedBytes())
			total = max(total, p.GetTotalBytes())
		}
		return nil
	})
	took := time.Since(start)
	if cerr := s.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	if r.GetIsError() {
		return 0, 0, fmt.Errorf("stream command failed: %.300s", resultText(r))
	}
	if total != streamBytes && r.GetTruncation().GetOriginalBytes() != streamBytes {
		return 0, 0, fmt.Errorf("the command's output was counted as %d bytes (Progress) / %d (Result), want %d",
			total, r.GetTruncation().GetOriginalBytes(), streamBytes)
	}
	f.dropped += dropped
	return took, got, nil
}
