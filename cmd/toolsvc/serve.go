package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/procs"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("toolsvc serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:7070", `address to serve on: "host:port" or "unix:///path/to.sock"`)
	grace := fs.Duration("grace", 30*time.Second, "on SIGTERM, how long running calls may finish before they are killed")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	adaptProcs := fs.Bool("adaptive-procs", true, "run Go code on one CPU while that keeps up and on all of them as soon as it does not, for the least latency per call (ignored when GOMAXPROCS is set); false keeps Go's default of all CPUs")
	config := executorFlags(fs, false)
	security := rpcauth.RegisterServerFlags(fs)
	transport := rpcserver.RegisterTransportFlags(fs, "", "to a client")
	var mcpConfigs listFlag
	fs.Var(&mcpConfigs, "mcp-config", `MCP servers every session gets and cannot remove, as JSON or a file in Claude Code's shape ({"mcpServers": {...}}); ${VAR} is expanded from toolsvc's environment (repeatable)`)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: toolsvc serve [flags]\n\nServes ExecutorService (gRPC) until SIGTERM or SIGINT.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\n"+telemetry.EnvUsage)
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	log, err := telemetry.NewLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	shutdown, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "toolsvc", ServiceVersion: version, Logger: log})
	if err != nil {
		return err
	}
	defer flushTelemetry(shutdown, log)
	cfg, err := config()
	if err != nil {
		return err
	}
	cfg.Logger = log
	if *adaptProcs {
		stop := adaptSchedulerProcs(log)
		defer stop()
	}
	if cfg.MCP.Servers, err = loadMCPConfigs(mcpConfigs, true); err != nil {
		return err
	}
	if err := sandbox.BecomeSubreaper(); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	// A range of session ids given without --max-sessions bounds the
	// sessions, as the open-file limit does below; with --max-sessions
	// too, a range too small for it is refused when the pool is made.
	if r := cfg.SessionUIDs; !isSet(fs, "max-sessions") && isSet(fs, "session-uids") && !r.IsZero() && cfg.MaxSessions > 0 {
		if n := execsvc.MaxSessionsFor(r); n < cfg.MaxSessions {
			log.Warn("fewer sessions than the default: the session id range holds ids for no more", "max_sessions", n, "default", cfg.MaxSessions, "session_uids", r.String())
			cfg.MaxSessions = n
		}
	}
	// Without --max-sessions, the default also fits what toolsvc's own
	// cgroup allows (a container with a small pids limit).
	if n := sandbox.FitSessions(cfg.MaxSessions); !isSet(fs, "max-sessions") && n < cfg.MaxSessions {
		c := sandbox.OwnCapacity()
		log.Warn("fewer sessions than the default: toolsvc's cgroup allows no more", "max_sessions", n, "default", cfg.MaxSessions, "tasks", c.Tasks, "tasks_from", c.TasksFrom, "memory", sandbox.FormatBytes(c.Memory), "memory_from", c.MemoryFrom)
		cfg.MaxSessions = n
	}
	nofile, fitted, err := raiseOpenFiles(cfg.MaxSessions, !isSet(fs, "max-sessions"))
	if err != nil {
		return err
	}
	if fitted != cfg.MaxSessions {
		log.Warn("fewer sessions than the default: the open-file limit cannot be raised for more", "max_sessions", fitted, "default", cfg.MaxSessions, "open_files", nofile)
		cfg.MaxSessions = fitted
	}
	log.Info("open files", "limit", nofile, "max_sessions", cfg.MaxSessions)
	secure, err := security.ServerOptions(*listen)
	if err != nil {
		return err
	}
	if err := transport.Validate(); err != nil {
		return fmt.Errorf("--grpc-*: %w", err)
	}
	ex, err := execsvc.New(cfg)
	if err != nil {
		return err
	}
	if n := cfg.Sandbox.Session.Processes; n > 0 && os.Geteuid() == 0 && !sandbox.ProcessBoundsAvailable() {
		// No pids controller to bound sessions with: the per-user process
		// limit, inherited by every tool process, is the fallback.
		lim, err := sandbox.LimitUserProcesses(uint64(n))
		if err != nil {
			ex.Close()
			return fmt.Errorf("--session-processes: %w", err)
		}
		log.Warn("no cgroup pids controller: processes are bounded per tool user instead of per session", "limit", lim)
	}
	lis, err := rpcserver.Listen(*listen)
	if err != nil {
		ex.Close()
		return fmt.Errorf("--listen: %w", err)
	}
	srv := rpcserver.New(log, append(secure, transport.ServerOptions()...)...)
	executorv1.RegisterExecutorServiceServer(srv.Server, execgrpc.NewServer(ex, log))
	srv.Health.SetServingStatus(executorv1.ExecutorService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	log.Info("toolsvc listening", "addr", lis.Addr().String(), "root", cfg.Root, "sandbox", cfg.Sandbox.Backend, "version", version)

	select {
	case err := <-serveErr:
		ex.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("draining: no new sessions; running calls get a grace period", "grace", *grace)
	srv.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	srv.Health.SetServingStatus(executorv1.ExecutorService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	ex.Drain(context.Background(), *grace)
	srv.Shutdown(5 * time.Second)
	sandbox.ReleaseSessionTempRoots()
	sandbox.ReleaseSessionGroups()
	log.Info("toolsvc stopped")
	return nil
}

// adaptSchedulerProcs runs the scheduler's Ps controller until the
// returned function is called.
func adaptSchedulerProcs(log *slog.Logger) (stop func()) {
	if ok, why := procs.Applies(); !ok {
		log.Info("scheduler Ps left as they are", "reason", why, "procs", runtime.GOMAXPROCS(0))
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		procs.Run(ctx, procs.Config{}, log)
	}()
	return func() {
		cancel()
		<-done
	}
}

// flushTelemetry exports what telemetry still buffers, waiting a few
// seconds at most: the process is about to exit.
func flushTelemetry(shutdown func(context.Context) error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.Warn("telemetry was not flushed", "error", err)
	}
}
