package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/ccenv"
	"github.com/toolwire/toolwire/pkg/checkpoint"
	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// dirsFlag is a repeatable flag of existing directories, kept absolute. A
// directory that does not exist is a usage error naming the flag.
type dirsFlag []string

func (d *dirsFlag) String() string { return strings.Join(*d, ",") }

func (d *dirsFlag) Set(v string) error {
	abs, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no directory %s", abs)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", abs)
	}
	*d = append(*d, abs)
	return nil
}

// executorFlags registers the flags that configure an executor, shared by
// serve and call --embedded, and returns a function that builds the config.
// For call --embedded (inProcess) the defaults are those of every embedded
// executor (embedded.Local): tools run as the user who runs toolsvc call,
// with the host's network, and sessions get no users of their own.
func executorFlags(fs *flag.FlagSet, inProcess bool) func() (execsvc.Config, error) {
	networkDefault, uidsDefault := sandbox.NetworkNone, defaultSessionUIDs()
	runAsUsage := "one user for the tool processes of all sessions when toolsvc runs as root, instead of --session-uids (with --session-uids off, the default is the workspace owner, or nobody)"
	networkUsage := `network of tool processes: "none" (loopback only), "allowlist" (only --allowed-domains, through an egress proxy the executor runs for each session; both need root or CAP_SYS_ADMIN) or "host"`
	profile := new(string)
	if inProcess {
		// Filled in after parsing: they depend on --profile.
		networkDefault, uidsDefault = "", ""
		runAsUsage = "user the tool processes run as (default with --profile development: you, the user running toolsvc call)"
		networkUsage += " (default: host with --profile development, none with --profile service)"
		profile = fs.String("profile", "development", `the in-process executor's sandbox: "development" (the one orchestrator -p runs: tools run as you, read all but the deny list, with your network) or "service" (toolsvc serve's, for trying a server's configuration in-process)`)
	}
	var (
		root          = fs.String("root", ".", "workspace root: sessions work here or in directories under it")
		sessionDirs   = fs.Bool("session-dirs", false, "give each session without a workspace its own directory under --root")
		maxConc       = fs.Int("max-concurrency", executor.DefaultMaxConcurrency, "parallel concurrency-safe calls per session (env TOOLWIRE_MAX_TOOL_CONCURRENCY, else CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY)")
		defTimeout    = fs.Duration("default-timeout", tool.DefaultTimeout, "Bash timeout when a call gives none (env BASH_DEFAULT_TIMEOUT_MS, in milliseconds)")
		maxTimeout    = fs.Duration("max-timeout", tool.DefaultMaxTimeout, "largest Bash timeout a call may ask for (env BASH_MAX_TIMEOUT_MS, in milliseconds; never below the default timeout)")
		maxOutput     = fs.Int("max-output-chars", tool.DefaultMaxOutputChars, "Bash output returned inline before it is shortened")
		maxRead       = fs.Int64("max-read-bytes", tool.DefaultMaxReadBytes, "largest file Read returns without offset/limit")
		checkpoints   = fs.Int64("checkpoint-bytes", checkpoint.DefaultMaxBytes, "previous file content each session keeps to restore what Write, Edit and NotebookEdit changed; the oldest checkpoints are dropped beyond it")
		fetchTimeout  = fs.Duration("web-fetch-timeout", tool.DefaultWebFetchTimeout, "how long one WebFetch may take: connecting, redirects and reading the page")
		retention     = fs.Duration("retention", 5*time.Minute, "how long a disconnected session and its events are kept for resume")
		permTimeout   = fs.Duration("permission-timeout", 5*time.Minute, "how long a call waits for a permission decision before it is denied")
		backend       = fs.String("sandbox", "landlock", `process confinement: "landlock" or "none" (no confinement; only when you mean it)`)
		network       = fs.String("network", networkDefault, networkUsage)
		runAs         = fs.String("run-as", "", runAsUsage)
		sessionUIDs   = fs.String("session-uids", uidsDefault, `ids FIRST-LAST to give each session a user of its own from, so sessions cannot see, signal or trace each other's processes (needs root; "off" to disable; --run-as alone disables it)`)
		fsync         = fs.Bool("fsync", false, "fsync every file write before it is renamed into place (durable across power loss; slower)")
		cpuTime       = fs.Duration("limit-cpu", 0, "CPU time of each tool process (0: unlimited)")
		memory        = fs.Int64("limit-memory", 0, "memory of each call in bytes (0: unlimited)")
		processes     = fs.Int("limit-processes", 0, "processes of each call, 2 or more (0: unlimited)")
		fileSize      = fs.Int64("limit-file-size", 0, "largest file a tool process may write, in bytes (0: unlimited)")
		openFiles     = fs.Int("limit-open-files", 0, "open files of each tool process (0: unlimited)")
		settingsFile  = fs.String("settings", "", "operator settings file (Claude Code settings.json shape): permission rules, mode and hooks every session gets and cannot loosen")
		mcpTimeout    = fs.Duration("mcp-timeout", mcpclient.DefaultStartTimeout, "how long each MCP server of a session may take to start and list its tools; the session's Hello waits for them this long at most")
		mcpMaxOutput  = fs.Int("mcp-max-output-tokens", envInt("MAX_MCP_OUTPUT_TOKENS", mcpclient.DefaultMaxOutputTokens), "largest MCP tool output, in tokens of 4 characters, before it is cut and saved to a file (env MAX_MCP_OUTPUT_TOKENS)")
		outputDir     = fs.String("output-dir", defaultOutputDir(), "where each session's saved outputs (full output of a shortened result, background shells' output) are kept, in a directory per session id, after the session ends, so a conversation resumed under the same id still finds them (empty: removed with the session)")
		outputKeep    = fs.Duration("output-retention", 24*time.Hour, "how long saved outputs are kept after their session ended (0: removed with the session)")
		sessProcs     = fs.Int("session-processes", sandbox.DefaultSessionTasks, "tasks (processes and threads) each session may have at once, all its calls together; a call that reaches it is killed and its result says so (0: no bound of its own; the sessions together stay below toolsvc's cgroup limit less a reserve for toolsvc)")
		sessMemory    = sizeFlag(fs, "session-memory", sandbox.DefaultSessionMemory, "memory each session's processes may use together, e.g. 2G or 512M; past it the kernel ends one of them and the call's result says so (0: no bound of its own)")
		tempQuota     = sizeFlag(fs, "session-temp-quota", defaultTempQuota, "size of each session's temp directory (TMPDIR and HOME of its processes), a file system of its own when toolsvc runs as root: writes past it fail with ENOSPC (0: none, the temp directory shares toolsvc's disk)")
		outputQuota   = sizeFlag(fs, "session-output-quota", defaultOutputQuota, "bytes of saved outputs (whole outputs of shortened results, background commands' output) each session may leave over its life; past it an output is not saved, and a background command's output stops and the command is killed (0: unlimited)")
		wsQuota       = sizeFlag(fs, "session-workspace-quota", defaultWorkspaceQuota, "disk quota of each workspace toolsvc makes (--session-dirs, or a new directory a client names under --root): writes past it fail with EDQUOT. It needs root and --root on btrfs with quotas enabled (btrfs quota enable DIR); elsewhere workspaces get none and toolsvc logs it, unless this flag is given, when toolsvc refuses to start (0: none)")
		maxSessions   = fs.Int("max-sessions", defaultMaxSessions, "most sessions the executor holds at once; further opens get RESOURCE_EXHAUSTED (0: no limit). It sizes toolsvc's reserve of tasks and memory, the session id pool and the open-file limit")
		maxPerClient  = fs.Int("max-sessions-per-client", 0, "most sessions one client may hold at once (client certificate subject with mutual TLS, else the peer's IP address; all unix-socket clients are one); further opens get RESOURCE_EXHAUSTED (0: no limit)")
		traceContent  = fs.Bool("trace-content", envBool(executor.TraceContentEnv), "record tool inputs and results (cut to 8 KiB) on the run_tool spans; they may hold secrets (env "+executor.TraceContentEnv+")")
		readOnly      dirsFlag
		readWrite     dirsFlag
		addDirs       dirsFlag
		sysReadPaths  dirsFlag
		sysWritePaths dirsFlag
		deny          listFlag
		egressFlags   egressFlags
	)
	egressFlags.register(fs)
	fs.Var(&readOnly, "ro", "extra directory the file tools (Read, Glob, Grep) of every session may read; processes get the same with --sandbox-read (repeatable)")
	fs.Var(&readWrite, "rw", "extra directory the file tools of every session may read and write; processes get the same with --sandbox-write, both with --add-dir (repeatable)")
	fs.Var(&sysReadPaths, "sandbox-read", "extra directory tool processes (Bash, hooks) may read and execute, besides the system directories, the workspace and the temp dir (repeatable)")
	fs.Var(&sysWritePaths, "sandbox-write", "extra directory tool processes may read, write and execute (repeatable)")
	fs.Var(&addDirs, "add-dir", "extra directory every session may read and write, with the file tools and from processes alike: --rw and --sandbox-write in one (repeatable)")
	fs.Var(&deny, "deny", "path pattern file tools refuse and processes are kept out of, e.g. '**/*.key' or '~/.config/cloud/**' (repeatable; replaces the defaults, which cover ~/.ssh, cloud credentials, keyrings and the like)")
	return func() (execsvc.Config, error) {
		explain := setupHints(inProcess).Explain
		if inProcess {
			if err := oneOf("--profile", *profile, "development", "service"); err != nil {
				return execsvc.Config{}, err
			}
			if *network == "" {
				*network = sandbox.NetworkNone
				if *profile == "development" {
					*network = embedded.DefaultNetwork
				}
			}
			if *sessionUIDs == "" {
				*sessionUIDs = "off"
				if *profile == "service" {
					*sessionUIDs = defaultSessionUIDs()
				}
			}
		}
		if err := oneOf("--sandbox", *backend, sandbox.BackendLandlock, sandbox.BackendNone); err != nil {
			return execsvc.Config{}, err
		}
		if err := oneOf("--network", *network, sandbox.NetworkNone, sandbox.NetworkAllowlist, sandbox.NetworkHost); err != nil {
			return execsvc.Config{}, err
		}
		for name, negative := range map[string]bool{
			"--limit-cpu": *cpuTime < 0, "--limit-memory": *memory < 0, "--limit-processes": *processes < 0,
			"--limit-file-size": *fileSize < 0, "--limit-open-files": *openFiles < 0,
			"--session-processes": *sessProcs < 0, "--max-sessions": *maxSessions < 0, "--max-sessions-per-client": *maxPerClient < 0,
		} {
			if negative {
				return execsvc.Config{}, fmt.Errorf("%s must not be negative (0: unlimited)", name)
			}
		}
		if *processes == 1 {
			return execsvc.Config{}, errors.New("--limit-processes must be 0 (unlimited) or at least 2: a command's shell and the command it starts are two processes, and the call's first process is started inside the call's cgroup")
		}
		var operator settings.Settings
		var err error
		if *settingsFile != "" {
			if operator, err = settings.LoadSettings(*settingsFile); err != nil {
				return execsvc.Config{}, fmt.Errorf("--settings: %w", err)
			}
		}
		// Claude Code's variables, under the flags: flag, then
		// TOOLWIRE_MAX_TOOL_CONCURRENCY, then Claude Code's names in the
		// environment, then the "env" object of --settings.
		envLimits, err := ccenv.Read(os.Getenv, operator.Env)
		if err != nil {
			return execsvc.Config{}, err
		}
		given := func(name string, v time.Duration) time.Duration {
			if isSet(fs, name) {
				return v
			}
			return 0
		}
		*defTimeout, *maxTimeout = envLimits.Timeouts(given("default-timeout", *defTimeout), given("max-timeout", *maxTimeout), tool.DefaultTimeout, tool.DefaultMaxTimeout)
		if isSet(fs, "max-concurrency") && *maxConc <= 0 {
			return execsvc.Config{}, fmt.Errorf("--max-concurrency must be positive, not %d", *maxConc)
		}
		if !isSet(fs, "max-concurrency") {
			*maxConc = envLimits.Concurrency(0, executor.DefaultMaxConcurrency)
		}
		cfg := execsvc.Config{
			Operator:        operator,
			Durable:         *fsync,
			Root:            *root,
			SessionDirs:     *sessionDirs,
			ReadOnly:        readOnly,
			ReadWrite:       readWrite,
			AddDirs:         addDirs,
			SandboxSettings: operator.Sandbox,
			Limits: tool.Limits{
				DefaultTimeout: *defTimeout,
				MaxTimeout:     *maxTimeout,
				MaxOutputChars: *maxOutput,
				MaxReadBytes:   *maxRead,
				// Zero or less: the default.
				MaxCheckpointBytes: *checkpoints,
				// WebFetch's own limit, not the Bash ones above.
				WebFetchTimeout: *fetchTimeout,
			},
			MaxConcurrency:       *maxConc,
			MaxSessions:          *maxSessions,
			MaxSessionsPerClient: *maxPerClient,
			TempQuota:            *tempQuota,
			OutputQuota:          *outputQuota,
			WorkspaceQuota:       *wsQuota,
			// Given, it must hold; by default, it holds where it can.
			RequireWorkspaceQuota: isSet(fs, "session-workspace-quota"),
			Retention:             *retention,
			PermissionTimeout:     *permTimeout,
			Version:               version,
			Sandbox: sandbox.Config{
				Backend:   *backend,
				Network:   *network,
				RunAsUser: *runAs,
				Limits: sandbox.Limits{
					CPUTime: *cpuTime, Memory: *memory, Processes: *processes,
					FileSize: *fileSize, OpenFiles: *openFiles,
				},
				Session:        sandbox.SessionBounds{Processes: *sessProcs, Memory: *sessMemory},
				ReadOnlyPaths:  sysReadPaths,
				ReadWritePaths: sysWritePaths,
			},
			Explain: explain,
		}
		if len(deny) > 0 {
			cfg.Deny = deny
		}
		if cfg.Egress, err = egressFlags.policy(*network); err != nil {
			return execsvc.Config{}, err
		}
		uids, err := sandbox.ParseUIDRange(*sessionUIDs)
		if err != nil {
			return execsvc.Config{}, fmt.Errorf("--session-uids: %w", err)
		}
		cfg.SessionUIDs = uids
		if *runAs != "" && !isSet(fs, "session-uids") {
			cfg.SessionUIDs = sandbox.UIDRange{}
		}
		if *runAs != "" && !cfg.SessionUIDs.IsZero() {
			return execsvc.Config{}, errors.New(`--run-as (one user for every session) and --session-uids (a user of its own for each) exclude each other: give one, or --session-uids off`)
		}
		cfg.TraceContent = *traceContent
		cfg.MCP.StartTimeout, cfg.MCP.MaxOutputTokens = *mcpTimeout, *mcpMaxOutput
		if *outputDir != "" && *outputKeep > 0 {
			if err := execsvc.PrepareOutputRoot(*outputDir); err != nil {
				return execsvc.Config{}, fmt.Errorf("--output-dir: %w", err)
			}
			cfg.OutputRoot, cfg.OutputRetention = *outputDir, *outputKeep
		}
		if inProcess && *profile == "development" {
			cfg = embedded.Local(cfg)
			// Your own machine: no session bounds unless you ask.
			if !isSet(fs, "session-processes") {
				cfg.Sandbox.Session.Processes = 0
			}
			if !isSet(fs, "session-memory") {
				cfg.Sandbox.Session.Memory = 0
			}
			if !isSet(fs, "session-temp-quota") {
				cfg.TempQuota = 0
			}
			if !isSet(fs, "session-output-quota") {
				cfg.OutputQuota = 0
			}
			if !isSet(fs, "session-workspace-quota") {
				cfg.WorkspaceQuota = 0
			}
		}
		return cfg, nil
	}
}

// Defaults of the session bounds: hundreds of sessions fit a 2-CPU,
// 24 GiB host; a temp directory's file system is memory, charged to its
// session's memory bound.
const (
	defaultMaxSessions = 1000
	defaultTempQuota   = 512 << 20
	defaultOutputQuota = 256 << 20
	// A workspace is disk, not memory: room for a project, its
	// dependencies and its build.
	defaultWorkspaceQuota = 2 << 30
)

// byteSize is a flag of a size in bytes that takes units (2G, 512M).
type byteSize struct{ n *int64 }

func (b byteSize) String() string {
	if b.n == nil {
		return ""
	}
	if *b.n == 0 {
		return "0"
	}
	return strings.ReplaceAll(sandbox.FormatBytes(*b.n), " ", "")
}

func (b byteSize) Set(v string) error {
	n, err := sandbox.ParseBytes(v)
	if err != nil {
		return err
	}
	*b.n = n
	return nil
}

// sizeFlag registers a byteSize flag.
func sizeFlag(fs *flag.FlagSet, name string, def int64, usage string) *int64 {
	n := new(int64)
	*n = def
	fs.Var(byteSize{n}, name, usage)
	return n
}

// defaultOutputDir is --output-dir's default: a directory of the invoking
// user's own in the system temp directory.
func defaultOutputDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("toolwire-outputs-%d", os.Geteuid()))
}

// oneOf checks that flag's value is one of allowed.
func oneOf(flag, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	q := quoteAll(allowed)
	list := q[len(q)-1]
	if len(q) > 1 {
		list = strings.Join(q[:len(q)-1], ", ") + " or " + list
	}
	return fmt.Errorf("%s must be %s, not %q", flag, list, value)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func envBool(name string) bool {
	on, _ := strconv.ParseBool(os.Getenv(name))
	return on
}

// defaultSessionUIDs is --session-uids' default: on when toolsvc runs as
// root, which it needs for them.
func defaultSessionUIDs() string {
	if os.Geteuid() == 0 {
		return sandbox.DefaultSessionUIDs.String()
	}
	return "off"
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// loadMCPConfigs reads --mcp-config values (JSON or files) into one set of
// servers, later ones replacing earlier ones of the same name, with ${VAR}
// expanded from this process's environment. With strict, every server must
// be usable; else the session reports those that are not.
func loadMCPConfigs(args []string, strict bool) (mcpclient.Servers, error) {
	var sets []mcpclient.Servers
	for _, a := range args {
		s, err := mcpclient.Load(a)
		if err != nil {
			return nil, fmt.Errorf("--mcp-config: %w", err)
		}
		sets = append(sets, s)
	}
	servers, err := mcpclient.Merge(sets...).Expand(os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("--mcp-config: %w", err)
	}
	for _, name := range servers.Names() {
		if err := servers[name].Validate(); err != nil && strict {
			return nil, fmt.Errorf("--mcp-config: server %q: %w", name, err)
		}
	}
	return servers, nil
}

// egressFlags are the flags of the egress allowlist (--network allowlist).
type egressFlags struct {
	allowed, denied, addresses entriesFlag
}

func (e *egressFlags) register(fs *flag.FlagSet) {
	fs.Var(&e.allowed, "allowed-domains", `with --network allowlist: hosts tool processes may reach through the egress proxy, e.g. "*.npmjs.org,pypi.org:443" ("*.d" covers subdomains of d, ":PORT" one port; comma-separated, repeatable; sandbox.network.allowedDomains of --settings adds to them)`)
	fs.Var(&e.denied, "denied-domains", "with --network allowlist: hosts never reached, whatever allows them; with --network host: hosts WebFetch never fetches from (comma-separated, repeatable)")
	fs.Var(&e.addresses, "allowed-addresses", `with --network allowlist or host: loopback, private or link-local ranges that allowed hosts may resolve to, for the egress proxy and WebFetch, e.g. "10.1.2.0/24" for an internal mirror (refused otherwise; comma-separated, repeatable)`)
}

// policy returns the operator's egress policy. --allowed-domains needs
// network "allowlist"; --denied-domains and --allowed-addresses apply to
// "host" too, where they bound WebFetch (tool processes reach the network
// directly there).
func (e *egressFlags) policy(network string) (egress.Policy, error) {
	if network != sandbox.NetworkAllowlist {
		flags := map[string]entriesFlag{"allowed-domains": e.allowed, "denied-domains": e.denied, "allowed-addresses": e.addresses}
		if network == sandbox.NetworkHost {
			flags = map[string]entriesFlag{"allowed-domains": e.allowed}
		}
		for name, f := range flags {
			if len(f) > 0 {
				return egress.Policy{}, fmt.Errorf("--%s applies to --network %s, not %q", name, networksOf(name), network)
			}
		}
		if network != sandbox.NetworkHost {
			return egress.Policy{}, nil
		}
	}
	p, err := egress.NewPolicy(e.allowed, e.denied, e.addresses)
	if err != nil {
		return egress.Policy{}, fmt.Errorf("--network %s: %w", network, err)
	}
	return p, nil
}

// entriesFlag is a repeatable flag of comma- or space-separated entries.
type entriesFlag []string

func (l *entriesFlag) String() string { return strings.Join(*l, ",") }

func (l *entriesFlag) Set(v string) error {
	*l = append(*l, strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })...)
	return nil
}

// networksOf names the networks an egress flag applies to.
func networksOf(flag string) string {
	if flag == "allowed-domains" {
		return "allowlist"
	}
	return "allowlist or host"
}
