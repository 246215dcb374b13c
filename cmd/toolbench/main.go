package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

const usage = `Usage: toolbench --toolsvc PATH [flags]

Starts the toolsvc binary at PATH as child processes on 127.0.0.1 (once with
--sandbox none, once with --sandbox landlock), measures whole-process figures
through the Execute stream, and compares them with floors measured in the same
run: a bare gRPC ping-pong and stream, and bare os/exec spawns of bash.

Flags:
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == echoCommand {
		if err := runEchoServer(); err != nil {
			fmt.Fprintln(os.Stderr, "toolbench echo server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "toolbench:", err)
		os.Exit(1)
	}
}

// errUsage marks a command-line mistake already reported.
var errUsage = errors.New("usage")

// options are toolbench's flags.
type options struct {
	toolsvc   string
	n, warm   int
	rounds    int
	streamN   int
	startN    int
	idleN     int
	sandboxes []string
	json      bool
	quiet     bool
	seed      uint64
	only      *regexp.Regexp
	scale     bool
	scaleOpts scaleOptions
	// grpcDefaults dials toolsvc with gRPC's default windows and buffers
	// instead of the ones toolwire's clients use.
	grpcDefaults bool
	// sessions are the counts of busy sessions of the sessions figure,
	// and sessionCalls the Reads each count sends in all.
	sessions     []int
	sessionCalls int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("toolbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.toolsvc, "toolsvc", "", "path of a built toolsvc binary (required)")
	fs.IntVar(&o.n, "n", 200, "samples per latency figure")
	fs.IntVar(&o.warm, "warmup", 20, "discarded warm-up samples per latency figure")
	fs.IntVar(&o.rounds, "rounds", 10, "interleaved rounds the samples are spread over")
	fs.IntVar(&o.streamN, "stream-n", 10, "64 MiB streams per streaming figure")
	fs.IntVar(&o.startN, "start-n", 20, "toolsvc starts per start-up figure")
	fs.IntVar(&o.idleN, "idle-n", 20, "samples per after-idle figure (each waits 100 ms first, as calls of a conversation wait for the model)")
	sandboxes := fs.String("sandboxes", "none,landlock", "toolsvc --sandbox values to measure, comma-separated")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.BoolVar(&o.quiet, "q", false, "no progress notes on stderr")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the round order (0: from the clock)")
	fs.BoolVar(&o.scale, "scale", false, "measure how one executor copes with many sessions instead: busy Bash sessions alone and beside idle ones, many busy sessions against as many direct bash loops, and toolsvc's RSS after many calls in one session")
	fs.DurationVar(&o.scaleOpts.duration, "scale-duration", 10*time.Second, "with --scale: length of each throughput figure")
	fs.IntVar(&o.scaleOpts.busy, "scale-busy", 10, "with --scale: busy Bash sessions of the first two figures")
	fs.IntVar(&o.scaleOpts.idle, "scale-idle", 1000, "with --scale: idle sessions held open beside them")
	fs.IntVar(&o.scaleOpts.many, "scale-many", 100, "with --scale: busy sessions compared with as many direct `bash -c true` loops")
	fs.IntVar(&o.scaleOpts.calls, "scale-calls", 100000, "with --scale: Read calls of the one session after which toolsvc's RSS is read")
	only := fs.String("only", "", "measure only the figures whose id matches this regular expression (e.g. 'bash_true/|floor_exec_bash_true$')")
	sessions := fs.String("sessions", "10,100,500", "counts of sessions busy at once for the sessions figure (Reads back to back in each; \"\" for none)")
	fs.IntVar(&o.sessionCalls, "sessions-calls", 20000, "Reads sent in all, per count of --sessions")
	fs.BoolVar(&o.grpcDefaults, "grpc-defaults", false, "dial toolsvc with gRPC's default HTTP/2 windows and buffers instead of those toolwire's clients use (4/16 MiB, 256 KiB), to measure what they change")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	o.sandboxes = strings.Split(*sandboxes, ",")
	var err error
	if o.sessions, err = parseSessions(*sessions); err != nil {
		fmt.Fprintf(stderr, "toolbench: %v\n", err)
		return o, errUsage
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintf(stderr, "toolbench: --only: %v\n", err)
			return o, errUsage
		}
		o.only = re
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "toolbench: unexpected arguments %q\n", fs.Args())
		return o, errUsage
	case o.toolsvc == "":
		fmt.Fprintln(stderr, "toolbench: --toolsvc is required")
		return o, errUsage
	case o.n < 1 || o.warm < 0 || o.rounds < 1 || o.streamN < 0 || o.startN < 0 || o.idleN < 0 || o.sessionCalls < 1:
		fmt.Fprintln(stderr, "toolbench: -n, --rounds and --sessions-calls must be positive; --warmup, --stream-n, --start-n and --idle-n not negative")
		return o, errUsage
	}
	for _, sb := range o.sandboxes {
		if sb != "none" && sb != "landlock" {
			fmt.Fprintf(stderr, "toolbench: --sandboxes: unknown backend %q\n", sb)
			return o, errUsage
		}
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return o, nil
}

// run starts the children, measures, stops the children, removes the
// temporary tree and prints the report.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.scale {
		o.scaleOpts.maxSession = max(o.scaleOpts.idle+o.scaleOpts.busy, o.scaleOpts.many) + 16
		progress := stderr
		if o.quiet {
			progress = io.Discard
		}
		return runScale(ctx, o, o.scaleOpts, stdout, progress)
	}
	p := plan{n: o.n, warm: o.warm, rounds: o.rounds, streamN: o.streamN, startN: o.startN, idleN: o.idleN,
		rng: rand.New(rand.NewPCG(o.seed, o.seed>>1|1)), progress: stderr}
	if o.quiet {
		p.progress = io.Discard
	}
	rep := &Report{Start: time.Now(), Machine: machine(), LoadBefore: loadAvg(),
		Samples: o.n, Warmup: o.warm, Rounds: o.rounds, Seed: o.seed}

	// Closers run in reverse order, whatever happens.
	var closers []func() error
	defer func() {
		for _, c := range slices.Backward(closers) {
			if cerr := c(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()

	w, err := newWorkDir()
	if err != nil {
		return err
	}
	closers = append(closers, w.cleanup)

	echo, echoAddrs, err := startEcho(ctx, w.tmp)
	if err != nil {
		return err
	}
	closers = append(closers, echo.stop)
	refDir, err := w.workspace("reference")
	if err != nil {
		return err
	}
	fixture, err := writeKiBFile(refDir)
	if err != nil {
		return err
	}
	var figs []*figure
	var svcs []*toolsvcProc
	for i, t := range []transport{untuned, tuned} {
		conn, err := dial(echoAddrs[i], t.DialOptions()...)
		if err != nil {
			return err
		}
		closers = append(closers, conn.Close)
		ping, err := openPing(ctx, conn)
		if err != nil {
			return err
		}
		closers = append(closers, func() error { ping.close(); return nil })
		readFile, err := openReadFile(ctx, conn, fixture)
		if err != nil {
			return err
		}
		closers = append(closers, func() error { readFile.close(); return nil })
		var abort *abortStream
		if !t.tuned {
			if abort, err = openAbort(ctx, conn); err != nil {
				return err
			}
			closers = append(closers, func() error { abort.close(); return nil })
		}
		figs = append(figs, floorFigures(p, t, echo.cmd.Process.Pid, ping, readFile, abort, conn)...)
	}

	for _, sb := range o.sandboxes {
		root, err := w.workspace("root-" + sb)
		if err != nil {
			return err
		}
		svc, _, err := startToolsvc(ctx, o.toolsvc, sb, root, w, o.grpcDefaults)
		if err != nil {
			return err
		}
		var sessions []*session
		closers = append(closers, func() error {
			var errs []error
			for _, s := range sessions {
				errs = append(errs, s.close())
			}
			return errors.Join(append(errs, svc.stop())...)
		})
		sf, err := toolsvcFigures(ctx, p, svc, root, &sessions)
		if err != nil {
			return err
		}
		if rep.Machine.ToolsvcVersion == "" && len(sessions) > 0 {
			rep.Machine.ToolsvcVersion = sessions[0].hello.GetExecutorVersion()
		}
		figs = append(figs, sf...)
		svcs = append(svcs, svc)
	}
	for _, sb := range o.sandboxes {
		f, err := startupFigure(p, o.toolsvc, sb, w, o.grpcDefaults)
		if err != nil {
			return err
		}
		figs = append(figs, f)
	}

	type sessionsRun struct {
		id  string
		svc *toolsvcProc
		n   int
	}
	var sessionRuns []sessionsRun
	for _, svc := range svcs {
		for _, n := range o.sessions {
			sessionRuns = append(sessionRuns, sessionsRun{id: fmt.Sprintf("read_sessions_%d/%s", n, svc.sandbox), svc: svc, n: n})
		}
	}
	if o.only != nil {
		figs = slices.DeleteFunc(figs, func(f *figure) bool { return !o.only.MatchString(f.id) })
		sessionRuns = slices.DeleteFunc(sessionRuns, func(r sessionsRun) bool { return !o.only.MatchString(r.id) })
		if len(figs) == 0 && len(sessionRuns) == 0 {
			return fmt.Errorf("--only %q matches no figure", o.only)
		}
	}
	if err := runRounds(ctx, p, figs); err != nil {
		return err
	}
	for _, r := range sessionRuns {
		fmt.Fprintf(p.progress, "toolbench: %s (load %s)\n", r.id, loadAvg())
		file, err := writeKiBFile(r.svc.root)
		if err != nil {
			return err
		}
		sf, err := sessionsFigure(ctx, r.svc, file, r.n, o.sessionCalls)
		if err != nil {
			return fmt.Errorf("%s: %w", r.id, err)
		}
		rep.Sessions = append(rep.Sessions, sf)
	}
	rep.LoadAfter = loadAvg()
	rep.Duration = time.Since(rep.Start).Round(time.Second).String()
	for _, f := range figs {
		rep.Figures = append(rep.Figures, summarise(f))
	}
	rep.Ratios, rep.Confinement = evaluate(rep.Figures, o.sandboxes)
	rep.Bounds = bounds(rep.Figures, o.sandboxes)
	if o.json {
		return writeJSON(stdout, rep)
	}
	return writeText(stdout, rep)
}
