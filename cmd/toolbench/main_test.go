package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// build compiles the toolsvc and toolbench commands into dir.
func build(t *testing.T, dir string) (toolsvc, toolbench string) {
	t.Helper()
	toolsvc, toolbench = filepath.Join(dir, "toolsvc"), filepath.Join(dir, "toolbench")
	for pkg, out := range map[string]string{"../toolsvc": toolsvc, ".": toolbench} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return toolsvc, toolbench
}

// runBench runs the toolbench binary with TMPDIR tmp and returns
// its stdout; it fails the test if toolbench fails or leaves anything in
// TMPDIR.
func runBench(t *testing.T, bin, tmp string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolbench %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("toolbench left %s in its TMPDIR", e.Name())
	}
	return stdout.String()
}

// checkNoSurvivors fails if a process of the built binaries, or one working
// in a directory under one of dirs (the tools toolsvc ran), is still alive.
func checkNoSurvivors(t *testing.T, binDir string, dirs ...string) {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	under := func(path, dir string) bool { return strings.HasPrefix(path, dir+string(filepath.Separator)) }
	for _, p := range procs {
		exe, _ := os.Readlink(p + "/exe")
		cwd, _ := os.Readlink(p + "/cwd")
		cmdline, _ := os.ReadFile(p + "/cmdline")
		if under(exe, binDir) || slices.ContainsFunc(dirs, func(d string) bool { return under(cwd, d) }) {
			t.Errorf("left running: %s exe %s cwd %s %q", p, exe, cwd, cmdline)
		}
	}
}

var allIDs = []string{
	"floor_grpc_pingpong", "floor_exec_bash_true", "floor_exec_bash_true_x32", "floor_exec_bash_true_idle", "floor_grpc_stream_64mib", "floor_exec_head_64mib",
	refRead, refStream, refStreamSaved, refAbort,
	"floor_grpc_pingpong_tuned", "floor_grpc_stream_64mib_tuned", "floor_exec_head_64mib_tuned", refRead + tunedSuffix, refStream + tunedSuffix, refStreamSaved + tunedSuffix,
	"read_1kib/none", "read_1kib_folded/none", "bash_true/none", "bash_true_idle/none", "bash_true_x32/none", "bash_stream_64mib/none", "abort_sleep/none", "abort_start/none", "startup_serving/none",
	"read_1kib/landlock", "read_1kib_folded/landlock", "bash_true/landlock", "bash_true_idle/landlock", "bash_true_x32/landlock", "bash_stream_64mib/landlock", "abort_sleep/landlock", "abort_start/landlock", "startup_serving/landlock",
}

// TestToolbench runs the real command against a real toolsvc and checks
// that every figure, target and confinement row is printed. It asserts no
// timing.
func TestToolbench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs toolsvc")
	}
	binDir := t.TempDir()
	toolsvc, toolbench := build(t, binDir)

	tmp1, tmp2 := sandboxtest.Dir(t), sandboxtest.Dir(t)
	out := runBench(t, toolbench, tmp1, "--toolsvc", toolsvc, "-n", "5", "--warmup", "1", "--rounds", "2", "--stream-n", "1", "--start-n", "1", "--idle-n", "2", "-q",
		"--sessions", "2,3", "--sessions-calls", "20")
	want := append([]string{"load average", "targets", "bounds", "cost of confinement", "many sessions"}, allIDs...)
	for _, target := range targets {
		for _, sb := range []string{"none", "landlock"} {
			want = append(want, target.name+" (sandbox "+sb+")")
		}
	}
	for _, s := range want {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	for _, name := range []string{"read_1kib", "bash_true", "bash_true_idle", "bash_true_x32", "bash_stream_64mib", "abort_sleep", "abort_start", "startup_serving"} {
		if !strings.Contains(out, "\n"+name+" ") {
			t.Errorf("confinement table lacks %s", name)
		}
	}
	for _, row := range []string{"none             2      20", "none             3      20", "landlock         3      20"} {
		if !strings.Contains(out, row) {
			t.Errorf("sessions table lacks the row %q", row)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}

	out = runBench(t, toolbench, tmp2, "--toolsvc", toolsvc, "--json", "-n", "2", "--warmup", "0", "--rounds", "1",
		"--stream-n", "1", "--start-n", "1", "--idle-n", "1", "--sandboxes", "none", "-q", "--sessions", "2", "--sessions-calls", "10")
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not a Report: %v\n%s", err, out)
	}
	got := map[string]Summary{}
	for _, f := range rep.Figures {
		got[f.ID] = f
	}
	for _, id := range allIDs {
		f, ok := got[id]
		switch {
		case strings.HasSuffix(id, "/landlock"):
			if ok {
				t.Errorf("--sandboxes none, yet %s was measured", id)
			}
		case !ok:
			t.Errorf("--json lacks figure %s", id)
		case f.N == 0 || f.Median <= 0:
			t.Errorf("figure %s: n %d, median %v", id, f.N, f.Median)
		case strings.Contains(id, "64mib") && f.CPUms <= 0:
			// Moving 64 MiB takes far more than a clock tick of CPU.
			t.Errorf("figure %s: CPU per sample %v ms", id, f.CPUms)
		}
	}
	if len(rep.Ratios) != len(targets) {
		t.Errorf("--json has %d ratios, want %d: %+v", len(rep.Ratios), len(targets), rep.Ratios)
	}
	// Read and stream, each over the untuned floor by both references and
	// over the tuned floor by the tuned one; the stream also by the
	// references that keep the output, the same way; the abort by its one
	// reference against the goal itself.
	if len(rep.Bounds) != 10 {
		t.Errorf("--json has %d bounds, want 10 (Read and stream: untuned floor by both references, tuned by the tuned one; the stream again by the saving references; the abort): %+v", len(rep.Bounds), rep.Bounds)
	}
	saving := 0
	for _, b := range rep.Bounds {
		if b.SavesOutput {
			saving++
		}
	}
	if saving != 3 {
		t.Errorf("--json has %d bounds from saving references, want 3", saving)
	}
	if len(rep.Sessions) != 1 || rep.Sessions[0].Sessions != 2 || rep.Sessions[0].Calls != 10 ||
		rep.Sessions[0].Sandbox != "none" || rep.Sessions[0].CallsPerSecond <= 0 {
		t.Errorf("--json sessions figures %+v, want one of 10 calls in 2 sessions", rep.Sessions)
	}
	for _, b := range rep.Bounds {
		if b.Value <= 0 || len(b.FigureToReference) != 1 {
			t.Errorf("bound %+v: want a value and the one measured figure against its reference", b)
		}
	}
	if rep.Machine.NProc == 0 || rep.LoadBefore == "" || rep.LoadAfter == "" {
		t.Errorf("--json lacks machine or load: %+v", rep)
	}
	checkNoSurvivors(t, binDir, tmp1, tmp2)
}

// TestToolbenchAsAnOrdinaryUser runs toolbench as nobody: the toolsvc it
// starts cannot make a network namespace, so toolbench gives it the
// host's network and says so in the report, instead of stopping.
func TestToolbenchAsAnOrdinaryUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs toolsvc")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run toolbench as another user")
	}
	binDir := sandboxtest.Dir(t)
	toolsvc, toolbench := build(t, binDir)
	tmp := sandboxtest.Dir(t)
	cmd := exec.Command(toolbench, "--toolsvc", toolsvc, "-n", "3", "--warmup", "1", "--rounds", "1", "-q",
		"--sandboxes", "none", "--sessions", "", "--only", "read_1kib/none$|floor_grpc_pingpong$")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp)
	cmd.Dir = tmp
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxtest.NobodyUID, Gid: sandboxtest.NobodyGID}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("toolbench as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"note: run as uid 65534, not root: toolsvc ran with --network host", "\nread_1kib/none "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	checkNoSurvivors(t, binDir, tmp)
}

func TestFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no toolsvc":      {"-n", "5"},
		"zero samples":    {"--toolsvc", "x", "-n", "0"},
		"bad sandbox":     {"--toolsvc", "x", "--sandboxes", "none,gvisor"},
		"stray argument":  {"--toolsvc", "x", "extra"},
		"unknown flag":    {"--toolsvc", "x", "--fast"},
		"negative warmup": {"--toolsvc", "x", "--warmup", "-1"},
		"negative idle-n": {"--toolsvc", "x", "--idle-n", "-1"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseFlags(args, io.Discard); !errors.Is(err, errUsage) {
				t.Errorf("parseFlags(%q) = %v, want errUsage", args, err)
			}
		})
	}
	o, err := parseFlags([]string{"--toolsvc", "x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.n != 200 || len(o.sandboxes) != 2 || o.seed == 0 {
		t.Errorf("defaults: %+v", o)
	}
}

func TestShareSpreadsSamples(t *testing.T) {
	for _, c := range []struct{ n, rounds int }{{200, 10}, {5, 2}, {1, 10}, {10, 3}, {0, 4}} {
		sum := 0
		for r := range c.rounds {
			k := share(c.n, c.rounds, r)
			if k < 0 || k > c.n/c.rounds+1 {
				t.Errorf("share(%d, %d, %d) = %d", c.n, c.rounds, r, k)
			}
			sum += k
		}
		if sum != c.n {
			t.Errorf("share(%d, %d, ·) sums to %d", c.n, c.rounds, sum)
		}
	}
}

func TestPercentile(t *testing.T) {
	vals := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {90, 9}, {10, 1}, {100, 10}, {0, 1}} {
		if got := percentile(vals, c.p); got != c.want {
			t.Errorf("percentile(1..10, %v) = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	sums := []Summary{
		{ID: "floor_grpc_pingpong", N: 1, Median: 100},
		{ID: "read_1kib/none", N: 1, Median: 140},
		{ID: "read_1kib/landlock", N: 1, Median: 160},
		{ID: "floor_grpc_stream_64mib", N: 1, Median: 500},
		{ID: "bash_stream_64mib/none", N: 1, Median: 100},
		{ID: "abort_sleep/none", N: 1, Median: 999, Unit: "µs"},
	}
	ratios, conf := evaluate(sums, []string{"none", "landlock"})
	want := map[string]bool{"read_1kib/none": true, "read_1kib/landlock": false, "bash_stream_64mib/none": false, "abort_sleep/none": false}
	if len(ratios) != len(want) {
		t.Fatalf("got %d ratios, want %d: %+v", len(ratios), len(want), ratios)
	}
	for _, r := range ratios {
		if met, ok := want[r.Figure]; !ok || r.Met != met {
			t.Errorf("%s: value %v goal %s met %v, want met %v", r.Figure, r.Value, r.Goal, r.Met, met)
		}
	}
	if len(conf) != 1 || conf[0].Figure != "read_1kib" || conf[0].Delta != 20 {
		t.Errorf("confinement = %+v", conf)
	}
}

func TestBounds(t *testing.T) {
	sums := []Summary{
		{ID: "floor_grpc_pingpong", N: 1, Median: 100},
		{ID: refRead, N: 1, Median: 160},
		{ID: "read_1kib/none", N: 1, Median: 320},
		{ID: "read_1kib/landlock", N: 1, Median: 400},
		{ID: "floor_grpc_stream_64mib", N: 1, Median: 500},
		{ID: refStream, N: 1, Median: 400},
		{ID: "bash_stream_64mib/none", N: 1, Median: 300},
		{ID: "bash_true/none", N: 1, Median: 300}, // no reference: no bound
		{ID: "floor_grpc_stream_64mib" + tunedSuffix, N: 1, Median: 800},
		{ID: refStream + tunedSuffix, N: 1, Median: 600},
	}
	got := bounds(sums, []string{"none", "landlock"})
	if len(got) != 4 {
		t.Fatalf("got %d bounds, want 4: %+v", len(got), got)
	}
	read, stream, tunedRefStream, tunedStream := got[0], got[1], got[2], got[3]
	if read.Reference != refRead || read.Value != 1.6 || read.Reachable || read.Goal != "<= 1.5x" ||
		read.FigureToReference["read_1kib/none"] != 2 || read.FigureToReference["read_1kib/landlock"] != 2.5 {
		t.Errorf("Read bound = %+v, want 1.6x, out of reach, figures at 2x and 2.5x the reference", read)
	}
	if why := unreachable(got, read); why != "no executor can meet the goal here" {
		t.Errorf("Read bound: %q, want no executor (no tuned reference was measured)", why)
	}
	if stream.Reference != refStream || stream.Floor != "floor_grpc_stream_64mib" || stream.Value != 0.8 || stream.Reachable ||
		stream.Goal != ">= 0.9x" || stream.FigureToReference["bash_stream_64mib/none"] != 0.75 {
		t.Errorf("stream bound = %+v, want 0.8x, out of reach for the untuned reference, the figure at 0.75x it", stream)
	}
	// The tuned reference against the untuned floor: an executor may tune
	// its transport, so the untuned floor's goal is within reach.
	if tunedRefStream.Reference != refStream+tunedSuffix || tunedRefStream.Floor != "floor_grpc_stream_64mib" ||
		tunedRefStream.Value != 1.2 || !tunedRefStream.Reachable || tunedRefStream.Goal != ">= 0.9x" ||
		tunedRefStream.FigureToReference["bash_stream_64mib/none"] != 0.5 {
		t.Errorf("stream bound by the tuned reference = %+v, want 1.2x, within reach, the figure at 0.5x it", tunedRefStream)
	}
	if why, want := unreachable(got, stream), "not with this reference's transport; "+refStream+tunedSuffix+" meets it"; why != want {
		t.Errorf("untuned stream bound: %q, want %q", why, want)
	}
	if tunedStream.Reference != refStream+tunedSuffix || tunedStream.Floor != "floor_grpc_stream_64mib"+tunedSuffix ||
		tunedStream.Value != 0.75 || tunedStream.Reachable || tunedStream.Goal != ">= 0.8x" || tunedStream.FigureToReference["bash_stream_64mib/none"] != 0.5 {
		t.Errorf("tuned stream bound = %+v, want 0.75x, out of reach, the figure at 0.5x the reference", tunedStream)
	}
	if why := unreachable(got, tunedStream); why != "no executor can meet the goal here" {
		t.Errorf("tuned stream bound: %q, want no executor", why)
	}
	if b := bounds(sums[1:3], []string{"none"}); len(b) != 0 {
		t.Errorf("bounds without the floor: %+v", b)
	}
}

// TestAbortBound checks the abort's bound: its goal is a time, so the
// reference's median is compared with the goal itself.
func TestAbortBound(t *testing.T) {
	for _, c := range []struct {
		ref       float64
		reachable bool
		why       string
	}{{400, true, ""}, {600, false, "no executor can meet the goal here"}} {
		sums := []Summary{
			{ID: refAbort, N: 1, Median: c.ref, Unit: "µs"},
			{ID: "abort_sleep/none", N: 1, Median: 1200, Unit: "µs"},
		}
		got := bounds(sums, []string{"none", "landlock"})
		if len(got) != 1 {
			t.Fatalf("reference at %v µs: %d bounds, want 1: %+v", c.ref, len(got), got)
		}
		b := got[0]
		if b.Reference != refAbort || b.Floor != "" || b.Value != c.ref || b.Unit != "µs" || b.Goal != "< 500 µs" ||
			b.Reachable != c.reachable || b.FigureToReference["abort_sleep/none"] != 1200/c.ref || len(b.FigureToReference) != 1 {
			t.Errorf("abort bound = %+v, want the reference's %v µs against < 500 µs, reachable %v, the figure at %vx it",
				b, c.ref, c.reachable, 1200/c.ref)
		}
		if !c.reachable {
			if why := unreachable(got, b); why != c.why {
				t.Errorf("abort bound: %q, want %q", why, c.why)
			}
		}
		var out bytes.Buffer
		if err := writeText(&out, &Report{Bounds: got}); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s  %g µs  < 500 µs", refAbort, c.ref); !strings.Contains(out.String(), want) {
			t.Errorf("the bounds table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSavedBounds checks the stream's bounds from the references that keep
// the whole output: they are judged among themselves, so a faster
// reference that keeps nothing does not make their goal look reachable.
func TestSavedBounds(t *testing.T) {
	sums := []Summary{
		{ID: "floor_grpc_stream_64mib", N: 1, Median: 1000},
		{ID: refStream + tunedSuffix, N: 1, Median: 950},
		{ID: refStreamSaved, N: 1, Median: 600},
		{ID: refStreamSaved + tunedSuffix, N: 1, Median: 750},
		{ID: "bash_stream_64mib/landlock", N: 1, Median: 600},
	}
	got := bounds(sums, []string{"landlock"})
	if len(got) != 3 {
		t.Fatalf("got %d bounds, want 3: %+v", len(got), got)
	}
	tunedRef, saved, savedTuned := got[0], got[1], got[2]
	if tunedRef.Reference != refStream+tunedSuffix || tunedRef.SavesOutput || !tunedRef.Reachable {
		t.Errorf("bound of the tuned reference = %+v, want reachable, keeping nothing", tunedRef)
	}
	if saved.Reference != refStreamSaved || !saved.SavesOutput || saved.Reachable || saved.Value != 0.6 {
		t.Errorf("bound of the saving reference = %+v, want 0.6x, out of reach, keeping the output", saved)
	}
	if savedTuned.Reference != refStreamSaved+tunedSuffix || !savedTuned.SavesOutput || savedTuned.Reachable ||
		savedTuned.Value != 0.75 || savedTuned.FigureToReference["bash_stream_64mib/landlock"] != 0.8 {
		t.Errorf("bound of the tuned saving reference = %+v, want 0.75x, out of reach, the figure at 0.8x it", savedTuned)
	}
	for _, b := range []Bound{saved, savedTuned} {
		if why, want := unreachable(got, b), "no executor that keeps the whole output can meet the goal here"; why != want {
			t.Errorf("%s: %q, want %q", b.Reference, why, want)
		}
	}
	// Once a saving reference meets the goal, the other is only a
	// matter of transport.
	got[2].Reachable = true
	if why, want := unreachable(got, saved), "not with this reference's transport; "+refStreamSaved+tunedSuffix+" meets it"; why != want {
		t.Errorf("untuned saving reference: %q, want %q", why, want)
	}
}

// TestReferences serves the echo service on loopback and checks what the
// reference methods answer: the file's lines numbered, exactly the bytes
// head was asked for, and a sleep that an abort kills.
func TestReferences(t *testing.T) {
	for _, tr := range []transport{untuned, tuned} {
		t.Run(fmt.Sprintf("tuned=%v", tr.tuned), func(t *testing.T) { testReferences(t, tr) })
	}
}

func testReferences(t *testing.T, tr transport) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(tr.ServerOptions()...)
	srv.RegisterService(&echoService, tr)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := dial(lis.Addr().String(), tr.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	path, err := writeKiBFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rf, err := openReadFile(t.Context(), conn, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.close()
	for range 2 {
		if _, err := rf.roundTrip(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rf.stream.SendMsg(rf.path); err != nil {
		t.Fatal(err)
	}
	text := new(wrapperspb.StringValue)
	if err := rf.stream.RecvMsg(text); err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("toolbench", 7)
	if want := "1\t" + line + "\n2\t" + line; !strings.HasPrefix(text.GetValue(), want) ||
		!strings.HasSuffix(text.GetValue(), "\n16\t"+line) || strings.Count(text.GetValue(), "\n") != 15 {
		t.Errorf("ReadFile answered %q, want 16 numbered lines", text.GetValue())
	}

	// The saving reference checks the trailer that says its file held
	// every byte, and leaves no file behind.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, m := range []int{methodExecFlood, methodExecFloodSaved, methodFlood} {
		took, n, err := floodOnce(t.Context(), conn, m)
		if err != nil || n != streamBytes || took <= 0 {
			t.Errorf("%s: %v, %d bytes, %v; want %d bytes", methodName(m), took, n, err, streamBytes)
		}
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("the saving reference left %v in its TMPDIR (%v)", left, err)
	}
	took, n, err := headOnce(t.Context(), tr)
	if err != nil || n != streamBytes || took <= 0 {
		t.Errorf("head: %v, %d bytes, %v; want %d bytes", took, n, err, streamBytes)
	}
	testAbortReference(t, conn)
}

// testAbortReference checks that the Abort stream starts a sleep below
// this process, which serves it, and that its abort kills the sleep, and
// that a message out of turn ends the stream.
func testAbortReference(t *testing.T, conn *grpc.ClientConn) {
	a, err := openAbort(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if took, err := a.abortOnce(t.Context(), os.Getpid()); err != nil || took <= 0 {
		t.Fatalf("abortOnce: %v, %v", took, err)
	}
	got := new(wrapperspb.StringValue)
	if _, err := a.exchange(wrapperspb.String(abortStart), got); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(got.GetValue(), abortStarted))
	if err != nil {
		t.Fatalf("answer to %q: %q", abortStart, got.GetValue())
	}
	if _, err := a.exchange(wrapperspb.String(abortKill), got); err != nil || got.GetValue() != abortKilled {
		t.Fatalf("abort: %q, %v", got.GetValue(), err)
	}
	// Killed, then reaped by the server: its /proc entry goes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists 10s after its abort", pid)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := a.exchange(wrapperspb.String(abortKill), got); err == nil {
		t.Errorf("an abort with nothing running was answered %q, want the stream to fail", got.GetValue())
	}
}

// TestPipeSize checks that the tuned transport really enlarges a pipe.
func TestPipeSize(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := tuned.setPipeSize(r); err != nil {
		t.Fatal(err)
	}
	got, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got != tuned.pipeSize {
		t.Errorf("pipe size %d, want %d", got, tuned.pipeSize)
	}
}

func TestProcCPU(t *testing.T) {
	// Burn CPU until getrusage counts 200 ms, then check that /proc
	// counted the same (within its 10 ms ticks): wall time plays no part,
	// so a loaded machine only makes the loop longer.
	self := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	start := self()
	for self()-start < 200*time.Millisecond {
	}
	used := self() - start
	after, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Other goroutines (the GC) may add CPU to both readings; /proc may
	// lag getrusage by a tick at each end.
	if d := after - before; d < used-3*clockTick {
		t.Errorf("/proc counted %v of CPU while getrusage counted %v", d, used)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestStreamCeiling(t *testing.T) {
	head := Summary{ID: "floor_exec_head_64mib", N: 1, CPUms: 150}
	flood := Summary{ID: "floor_grpc_stream_64mib", N: 1, CPUms: 250}
	// 400 ms of CPU on 2 CPUs: 64 MiB in 200 ms at best.
	if got := streamCeiling(head, flood, 2); math.Abs(got-320) > 0.01 {
		t.Errorf("ceiling = %v MiB/s, want 320", got)
	}
	if got := streamCeiling(Summary{}, flood, 2); got != 0 {
		t.Errorf("ceiling without the head floor = %v, want 0", got)
	}
}

func TestParseSessions(t *testing.T) {
	got, err := parseSessions("10, 100,500")
	if err != nil || !slices.Equal(got, []int{10, 100, 500}) {
		t.Errorf("parseSessions = %v, %v", got, err)
	}
	if got, err := parseSessions(""); err != nil || got != nil {
		t.Errorf(`parseSessions("") = %v, %v; want none`, got, err)
	}
	for _, bad := range []string{"0", "ten", "10,", "-1"} {
		if _, err := parseSessions(bad); err == nil {
			t.Errorf("parseSessions(%q) passed", bad)
		}
	}
}
