package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/ccenv"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// headlessFlags are the flags of orchestrator -p beyond the common ones.
type headlessFlags struct {
	print, cont, verbose, version                  bool
	outputFormat, permissionMode, resume, rewindTo string
	sessionID, systemPrompt, appendSystem, workDir string
	allowed, disallowed, tools                     listFlag
	mcp                                            mcpFlags
	set                                            map[string]bool // flags given on the command line
}

func (h *headlessFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&h.print, "p", false, "answer the prompt and exit (headless)")
	fs.BoolVar(&h.print, "print", false, "same as -p")
	fs.BoolVar(&h.cont, "c", false, "same as --continue")
	fs.BoolVar(&h.cont, "continue", false, "go on with the latest conversation held in the current directory")
	fs.StringVar(&h.resume, "r", "", "same as --resume")
	fs.StringVar(&h.resume, "resume", "", "go on with the conversation with this session id")
	fs.StringVar(&h.rewindTo, "rewind-to", "", "with --resume or --continue: first go back to before the assistant message holding this tool_use id: the files Write, Edit and NotebookEdit changed from there on are restored, and the conversation is cut there; the prompt, if any, goes on from that point")
	fs.StringVar(&h.outputFormat, "output-format", "text", "output: text (the final answer), json (one result object) or stream-json (one JSON event per line)")
	fs.BoolVar(&h.verbose, "verbose", false, "show every tool call and its output on stderr (text and json output)")
	fs.BoolVar(&h.version, "v", false, "same as --version")
	fs.BoolVar(&h.version, "version", false, "print the version and exit")
	fs.StringVar(&h.permissionMode, "permission-mode", "", "default, acceptEdits, plan or bypassPermissions (over the settings files' defaultMode)")
	fs.StringVar(&h.sessionID, "session-id", "", "id for a new session (default: random)")
	fs.StringVar(&h.systemPrompt, "system-prompt", "", "replace the default system prompt")
	fs.StringVar(&h.appendSystem, "append-system-prompt", "", "text added at the end of the system prompt")
	fs.StringVar(&h.workDir, "workspace", "", "working directory of a new session on the executor (default: its root)")
	for _, name := range []string{"allowedTools", "allowed-tools"} {
		fs.Var(&h.allowed, name, `permission rules that run without asking, added to the settings files' (e.g. "Read,Bash(git log:*)"; repeatable)`)
	}
	for _, name := range []string{"disallowedTools", "disallowed-tools"} {
		fs.Var(&h.disallowed, name, "permission rules that are refused, added to the settings files'; bare tool names are also not offered (repeatable)")
	}
	fs.Var(&h.tools, "tools", `offer only these tools, by name (repeatable; "default": all, "": none)`)
	h.mcp.register(fs, "use only the MCP servers of --mcp-config: not the project's "+projectMCPFile)
}

// given reports whether one of the flags names was on the command line.
func (h *headlessFlags) given(names ...string) bool {
	for _, n := range names {
		if h.set[n] {
			return true
		}
	}
	return false
}

// headless answers one prompt without a client, like `claude -p`, and
// returns the exit code: 0 when the model ended its turn, 1 otherwise.
func headless(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) (int, error) {
	fs := flag.NewFlagSet("orchestrator -p", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c common
		h headlessFlags
	)
	c.register(fs, "warn")
	h.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, err
		}
		return 2, errUsage
	}
	if h.version {
		printVersion(stdout)
		return 0, nil
	}
	if !h.print {
		fmt.Fprintf(stderr, "orchestrator: unknown command %q\n\n%s", args[0], usage)
		return 2, errUsage
	}
	h.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { h.set[f.Name] = true })
	switch {
	case h.outputFormat != "text" && h.outputFormat != "json" && h.outputFormat != "stream-json":
		return 2, usagef("--output-format must be text, json or stream-json, not %q", h.outputFormat)
	case h.cont && h.resume != "":
		return 2, usagef("--continue and --resume both name the conversation to go on with; give one")
	case (h.cont || h.resume != "") && h.sessionID != "":
		return 2, usagef("--session-id names a new conversation; it cannot go with --continue or --resume")
	case h.rewindTo != "" && !h.cont && h.resume == "":
		return 2, usagef("--rewind-to goes back in a conversation: name it with --resume or --continue")
	}
	dir, err := clientDir()
	if err != nil {
		return 1, err
	}
	prompt, err := readPrompt(ctx, strings.Join(pos, " "), stdin, stderr)
	if errors.Is(err, errNoPrompt) && h.rewindTo != "" {
		err = nil // rewind only
	}
	if errors.Is(err, errNoPrompt) {
		return 2, usageError{err}
	}
	if err != nil {
		return 1, err
	}

	log, err := telemetry.NewLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return 2, usageError{err}
	}
	if err := c.checkSandboxFlags(); err != nil {
		return 2, err
	}
	client, err := c.modelClient(getenv, log)
	if err != nil {
		if errors.Is(err, model.ErrNoCredentials) {
			return 1, errors.New("no API key: set ANTHROPIC_API_KEY to your Anthropic API key (and ANTHROPIC_BASE_URL to use a compatible endpoint instead of api.anthropic.com)")
		}
		return 1, err
	}
	if err := c.checkEgress(); err != nil {
		return 2, err
	}
	if err := h.mcp.checkRequire(); err != nil {
		return 2, err
	}
	flagServers, err := h.mcp.load(getenv)
	if err != nil {
		return 2, err
	}
	if err := c.checkWeb(); err != nil {
		return 2, err
	}
	store, err := c.store()
	if err != nil {
		return 1, err
	}
	defer store.Close()
	if c.executor == "" {
		// The in-process executor starts sandboxed processes: adopt orphans.
		if err := sandbox.BecomeSubreaper(); err != nil {
			return 1, fmt.Errorf("become child subreaper: %w", err)
		}
	}
	c.executorSecurity.Getenv = getenv
	if err := c.checkExecutorSecurity(); err != nil {
		return 1, err
	}
	dial := newDialer(c.embeddedConfig(log), c.executorSecurity, *c.executorTransport, log)
	defer dial.Close()
	place := newPlacer(ctx, dial, log)
	defer place.Close()
	executors, err := dial.executors(log)
	if err != nil {
		return 1, err
	}
	// The subagent types of the run: ~/.claude/agents and the project's
	// .claude/agents, like the settings files and CLAUDE.md.
	agentDefs := loadAgents(userConfigDir(getenv), projectDir(c.executor == "", c.root, h.workDir, dir), log)
	orch, err := orchestrator.New(orchestrator.Config{
		Model:           client,
		Executor:        executors,
		Placer:          place,
		ResumeWindow:    c.resumeWindow,
		DefaultExecutor: c.executorAddr(),
		Store:           orchestrator.FileStore(store),
		Permissions:     denyUnattended,
		WebFetchModel:   c.webFetchModel,
		WebSearch:       c.webSearchCfg,
		RequireSandbox:  h.mcp.required,
		ClientVersion:   version,
		Logger:          log,
		Agents:          agentDefs,
		SubagentsOnPool: c.subagentsOnPool,
	})
	if err != nil {
		return 1, err
	}
	defer orch.Close()

	sess, skipped, err := openSession(ctx, orch, store, &c, &h, runEnv{dir: dir, client: client, dial: dial, executors: executors, place: place, getenv: getenv, log: log, mcp: flagServers, agents: agentDefs})
	if errors.Is(err, orchestrator.ErrInvalid) {
		err = usageError{err}
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2, err
	}
	if err != nil {
		return 1, err
	}

	for _, sk := range skipped {
		fmt.Fprintf(stderr, "orchestrator: %s: MCP server %q not used: %s\n", projectMCPFile, sk.name, sk.reason)
	}
	if h.rewindTo != "" {
		if err := rewind(ctx, sess, h.rewindTo, stderr); err != nil {
			return 1, err
		}
		if prompt == "" {
			return 0, nil
		}
	}
	out := newPrinter(h.outputFormat, stdout, sess)
	out.skippedMCP = skipped
	switch {
	case h.verbose && h.outputFormat != "stream-json":
		out.verbose = stderr
	case h.outputFormat == "text":
		out.status = newStatusLine(stderr)
	}
	out.announce()
	sub := sess.Subscribe(sess.LastSequence())
	followed := make(chan struct{})
	followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollow()
	go func() {
		defer close(followed)
		out.follow(followCtx, sub)
	}()
	res, err := sess.Run(ctx, prompt)
	if err != nil {
		stopFollow()
		<-followed
		return 1, err
	}
	<-followed
	signaled := errors.Is(context.Cause(ctx), errSignaled)
	if err := out.finish(res, signaled); err != nil {
		return 1, fmt.Errorf("write output: %w", err)
	}
	if signaled {
		fmt.Fprintf(stderr, "orchestrator: %v; the conversation is saved: go on with --resume %s (or -c)\n", context.Cause(ctx), sess.ID())
	}
	switch res.StopReason {
	case orchestrator.StopEndTurn, orchestrator.StopStopSequence:
		return 0, nil
	}
	return 1, nil
}

// runEnv is what openSession needs of the run besides the flags.
type runEnv struct {
	dir       string // the client's directory
	client    *model.Client
	dial      *dialer
	executors orchestrator.Executor
	place     *placer
	getenv    func(string) string
	log       *slog.Logger
	mcp       mcpclient.Servers   // of --mcp-config
	agents    []agents.Definition // user-defined subagent types
}

// openSession creates the run's session, or loads the one --resume or
// --continue names and applies this run's flags to it. Everything a flag
// can get wrong is checked before anything is written.
//
// Per run, as with claude -p, come the settings files, --settings and the
// permission flags, --tools, the system prompt flags and the CLAUDE.md
// files: a resumed conversation gets those of the new run, not the old
// one's. The model, --max-tokens, --max-turns and --thinking-budget stay
// what the conversation had unless given again.
//
// The MCP servers are those of --mcp-config and, unless
// --strict-mcp-config, the project's .mcp.json servers the settings
// approve; the project's servers left out are returned.
func openSession(ctx context.Context, orch *orchestrator.Orchestrator, store *transcript.Store, c *common, h *headlessFlags, r runEnv) (*orchestrator.Session, []skippedServer, error) {
	var (
		sess *orchestrator.Session
		old  orchestrator.SessionConfig
		err  error
	)
	id := h.resume
	if h.cont {
		if id, err = store.Latest(r.dir); errors.Is(err, orchestrator.ErrNotFound) {
			return nil, nil, fmt.Errorf("no conversation to continue in %s (orchestrator sessions list --all shows every directory's)", r.dir)
		} else if err != nil {
			return nil, nil, err
		}
	}
	target, embedded := c.executorAddr(), c.executor == ""
	workspace := h.workDir
	if id != "" {
		if sess, err = orch.Session(ctx, id); errors.Is(err, orchestrator.ErrNotFound) {
			return nil, nil, fmt.Errorf("no conversation with session id %q in %s", id, store.Dir())
		} else if err != nil {
			return nil, nil, err
		}
		old = sess.Config()
		if h.given("workspace") && h.workDir != old.Workspace {
			return nil, nil, usagef("--workspace: conversation %s works in %q; a conversation keeps its workspace", id, old.Workspace)
		}
		if h.given("executor") && c.executor != old.Executor && c.executor != old.Pool {
			return nil, nil, usagef("--executor: conversation %s runs on %q; a conversation keeps its executor", id, cmp.Or(old.Pool, old.Executor))
		}
		target, embedded, workspace = old.Executor, old.Executor == embeddedAddr, old.Workspace
	}
	project := projectDir(embedded, c.root, workspace, r.dir)
	userDir := userConfigDir(r.getenv)
	permissions, sandboxSettings, err := runSettings(userDir, project, permissionFlags{
		settings: c.settings, mode: h.permissionMode, allowed: h.allowed, disallowed: h.disallowed,
	})
	if err != nil {
		return nil, nil, err
	}
	servers := r.mcp
	var skipped []skippedServer
	if !h.mcp.strict {
		approval, err := mcpSettings(userDir, project, c.settings)
		if err != nil {
			return nil, nil, err
		}
		var fromProject mcpclient.Servers
		if fromProject, skipped, err = projectMCP(project, approval, r.getenv); err != nil {
			return nil, nil, err
		}
		servers = mcpclient.Merge(fromProject, r.mcp)
	}
	// The settings files' sandbox lists shape the in-process executor,
	// which starts on first use below. Its network lists are then that
	// executor's own (operator's) policy already; sent again as the
	// session's, they would narrow --allowed-domains down to the files'.
	r.dial.setSandboxSettings(sandboxSettings)
	// Claude Code's variables: the environment's, then the settings
	// files' "env" (pkg/ccenv).
	limits, err := ccenv.Read(r.getenv, permissions.Env)
	if err != nil {
		return nil, nil, usageError{err}
	}
	r.dial.setLimits(limits)
	if embedded {
		permissions.Sandbox.Network = settings.Network{}
	}
	defs, err := listTools(ctx, r.executors, r.place, target)
	if err != nil {
		return nil, nil, err
	}
	defs = append(defs, orchestrator.LocalTools(r.agents)...)
	offer, hide, err := checkToolNames(defs, h.tools, h.allowed, h.disallowed)
	if err != nil {
		return nil, nil, err
	}
	if h.given("tools") && len(h.tools) == 0 {
		for _, d := range defs { // --tools "": no tools at all
			hide = append(hide, d.Name)
		}
	}
	var appended []string
	if memory := instructionsPrompt(loadInstructions(userDir, project, r.log)); memory != "" {
		appended = append(appended, memory)
	}
	if h.appendSystem != "" {
		appended = append(appended, h.appendSystem)
	}
	cfg := orchestrator.SessionConfig{
		Model:              r.client.Model(),
		SystemPrompt:       h.systemPrompt,
		AppendSystemPrompt: strings.Join(appended, "\n\n"),
		MaxTokens:          c.maxTokens,
		MaxTurns:           c.maxTurns,
		AllowedTools:       offer,
		DisallowedTools:    hide,
		Settings:           permissions,
		Workspace:          workspace,
		ThinkingBudget:     c.thinkingBudget,
		Directory:          r.dir,
		MCPServers:         servers,
	}
	if sess == nil {
		sess, err = orch.Create(ctx, h.sessionID, cfg)
		if err != nil {
			return nil, nil, err
		}
		return sess, skipped, nil
	}
	if !h.given("model") && old.Model != "" {
		cfg.Model = old.Model
	}
	if !h.given("max-tokens") && old.MaxTokens != 0 {
		cfg.MaxTokens = old.MaxTokens
	}
	if !h.given("max-turns") && old.MaxTurns != 0 {
		cfg.MaxTurns = old.MaxTurns
	}
	if !h.given("thinking-budget") {
		cfg.ThinkingBudget = old.ThinkingBudget
	}
	if err := sess.Reconfigure(cfg); err != nil {
		return nil, nil, err
	}
	// The init event reports the session as it runs: its tools and
	// working directory are known once it is connected.
	if err := sess.Connect(ctx); err != nil {
		return nil, nil, err
	}
	return sess, skipped, nil
}

// listTools asks the executor at target (a member of it, for a pool)
// which tools it has.
func listTools(ctx context.Context, executors orchestrator.Executor, place *placer, target string) ([]execapi.ToolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr, release, err := place.Place(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, err)
	}
	defer release()
	tools, err := executors.ListTools(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, err)
	}
	return tools, nil
}

// clientDir returns the current directory, links resolved, as sessions
// record it for --continue.
func clientDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("current directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(wd); err == nil {
		return real, nil
	}
	return wd, nil
}

// projectDir is the directory whose .claude settings and CLAUDE.md files
// a run reads: the in-process executor's workspace (--root, and the
// session's workspace under it), or, with a remote executor whose files
// are not here, the current directory.
func projectDir(embedded bool, root, workspace, clientDir string) string {
	if !embedded {
		return clientDir
	}
	base, err := filepath.Abs(root)
	if err != nil {
		return clientDir
	}
	switch {
	case workspace == "":
		return base
	case filepath.IsAbs(workspace):
		return workspace
	}
	return filepath.Join(base, workspace)
}

// denyUnattended refuses every permission request: in headless mode there
// is nobody to ask.
func denyUnattended(_ string, req execapi.PermissionRequest) *execapi.PermissionDecision {
	return &execapi.PermissionDecision{
		ToolUseID: req.ToolUseID,
		Behavior:  execapi.PermissionDeny,
		Message: fmt.Sprintf("Permission to use %s was not granted: this session runs headless with nobody to ask. "+
			"The user can allow it with --allowedTools or --permission-mode.", req.ToolName),
	}
}
