package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolwire/toolwire/pkg/ccenv"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchgrpc"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// serve runs OrchestratorService until SIGTERM or SIGINT.
func serve(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("orchestrator serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c   common
		mcp mcpFlags
	)
	c.register(fs, "info")
	mcp.register(fs, "sessions get only the servers of --mcp-config: a CreateSession that brings its own MCP servers is refused")
	listen := fs.String("listen", "127.0.0.1:7071", `address to serve on: "host:port" or "unix:///path/to.sock"`)
	grace := fs.Duration("grace", 10*time.Second, "on shutdown, how long streams may finish before they are cut")
	storeURL := fs.String("store", "", "where conversations are kept: empty for transcript files in --sessions-dir (one replica), or a PostgreSQL URL (postgres://user@host/db) shared by replicas; default $"+storeEnv)
	replica := fs.String("replica", "", "this replica's name in the leases of a shared --store (default: the host name)")
	leaseTTL := fs.Duration("lease-ttl", orchestrator.DefaultLeaseTTL, "with a shared --store: how long a turn's lease lasts unless renewed, so how soon another replica takes over a turn whose replica died")
	security := rpcauth.RegisterServerFlags(fs)
	transport := rpcserver.RegisterTransportFlags(fs, "", "to a client")
	if _, err := parseInterleaved(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	log, err := telemetry.NewLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	security.Getenv = getenv
	c.executorSecurity.Getenv = getenv
	secure, err := security.ServerOptions(*listen)
	if err != nil {
		return err
	}
	if err := transport.Validate(); err != nil {
		return fmt.Errorf("--grpc-*: %w", err)
	}
	if err := c.checkExecutorSecurity(); err != nil {
		return err
	}
	if err := c.checkSandboxFlags(); err != nil {
		return err
	}
	client, err := c.modelClient(getenv, log)
	if err != nil {
		if errors.Is(err, model.ErrNoCredentials) {
			return errors.New("no API key: set ANTHROPIC_API_KEY to your Anthropic API key (and ANTHROPIC_BASE_URL to use a compatible endpoint instead of api.anthropic.com)")
		}
		return err
	}
	if err := c.checkEgress(); err != nil {
		return err
	}
	if err := c.checkWeb(); err != nil {
		return err
	}
	settings, err := c.loadSettings()
	if err != nil {
		return err
	}
	if err := mcp.checkRequire(); err != nil {
		return err
	}
	mcpServers, err := mcp.load(getenv)
	if err != nil {
		return err
	}
	if c.limits, err = ccenv.Read(getenv, settings.Env); err != nil {
		return err
	}
	if *storeURL == "" {
		*storeURL = getenv(storeEnv)
	}
	if *replica == "" {
		*replica, _ = os.Hostname()
	}
	store, where, err := openStore(ctx, &c, *storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	if c.executor == "" {
		if err := sandbox.BecomeSubreaper(); err != nil {
			return fmt.Errorf("become child subreaper: %w", err)
		}
	}
	dial := newDialer(c.embeddedConfig(log), c.executorSecurity, *c.executorTransport, log)
	defer dial.Close()
	if c.executor == "" {
		// Start the in-process executor now, so that a setup error stops
		// the server rather than every session.
		if _, err := dial.Conn(ctx, embeddedAddr); err != nil {
			return err
		}
	}
	place := newPlacer(ctx, dial, log)
	defer place.Close()
	executors, err := dial.executors(log)
	if err != nil {
		return err
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model:           client,
		Executor:        executors,
		Placer:          place,
		ResumeWindow:    c.resumeWindow,
		DefaultExecutor: c.executorAddr(),
		Store:           store,
		Replica:         *replica,
		LeaseTTL:        *leaseTTL,
		Defaults: orchestrator.SessionConfig{
			Model: client.Model(), MaxTokens: c.maxTokens, MaxTurns: c.maxTurns,
			ThinkingBudget: c.thinkingBudget, Settings: settings,
		},
		WebFetchModel:   c.webFetchModel,
		WebSearch:       c.webSearchCfg,
		MCPServers:      mcpServers,
		StrictMCP:       mcp.strict,
		RequireSandbox:  mcp.required,
		ClientVersion:   version,
		Logger:          log,
		Agents:          loadAgents(userConfigDir(getenv), "", log),
		SubagentsOnPool: c.subagentsOnPool,
	})
	if err != nil {
		return err
	}
	lis, err := rpcserver.Listen(*listen)
	if err != nil {
		orch.Close()
		return fmt.Errorf("--listen: %w", err)
	}
	srv := rpcserver.New(log, append(secure, transport.ServerOptions()...)...)
	orchgrpc.NewServer(orch, log).Register(srv.Server)
	srv.Health.SetServingStatus(orchgrpc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	log.Info("orchestrator listening", "addr", lis.Addr().String(), "executor", c.executorAddr(),
		"store", where, "replica", *replica, "model", client.Model(), "version", version)

	select {
	case err = <-serveErr:
		err = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		log.Info("shutting down")
	}
	// Readiness fails from the first moment of the drain, so that no new
	// conversation comes while the running turns are interrupted.
	srv.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	srv.Health.SetServingStatus(orchgrpc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	// Interrupt running turns next so Converse streams see them end.
	orch.Close()
	srv.Shutdown(*grace)
	log.Info("orchestrator stopped")
	return err
}
