package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/ccenv"
	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

// listFlag is a repeatable flag whose values may also be separated by commas
// or spaces (outside parentheses, so "Bash(git log:*)" stays whole).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, splitRules(v)...)
	return nil
}

// splitRules splits "Read,Bash(git log:*) Edit" into rules.
func splitRules(s string) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if r := strings.TrimSpace(cur.String()); r != "" {
			out = append(out, r)
		}
		cur.Reset()
	}
	for _, c := range s {
		switch {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case (c == ',' || c == ' ' || c == '\t' || c == '\n') && depth == 0:
			flush()
			continue
		}
		cur.WriteRune(c)
	}
	flush()
	return out
}

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

// common holds the flags shared by serve and headless mode.
type common struct {
	subagentsOnPool bool
	model           string
	maxTokens       int
	maxTurns        int
	thinkingBudget  int
	executor        string
	resumeWindow    time.Duration
	settings        string
	sessionsDir     string
	root            string
	sandbox         string
	network         string
	runAs           string
	addDirs         dirsFlag
	sandboxRead     dirsFlag
	sandboxWrite    dirsFlag
	logFormat       string
	logLevel        string
	allowedDomains  listFlag
	deniedDomains   listFlag
	allowedAddrs    listFlag
	fetchTimeout    time.Duration
	webFetchModel   string
	webSearch       bool
	searchAllowed   listFlag
	searchBlocked   listFlag
	searchMaxUses   int
	webSearchCfg    *model.WebSearch // parsed by checkWeb
	egress          egress.Policy    // parsed by checkEgress

	// sandboxSettings are the sandbox lists of the settings, for the
	// in-process executor (set by loadSettings).
	sandboxSettings settings.Sandbox

	// limits are what Claude Code's variables (pkg/ccenv) set, for the
	// in-process executor.
	limits ccenv.Limits

	executorSecurity *rpcauth.ClientConfig // TLS and token of the link to a remote executor
	// executorTransport is the HTTP/2 windows and buffers of the link to
	// a remote executor.
	executorTransport *rpcserver.Transport
}

func (c *common) register(fs *flag.FlagSet, defaultLogLevel string) {
	fs.StringVar(&c.model, "model", "", "model name (default: $ANTHROPIC_MODEL, else "+model.DefaultModel+")")
	fs.IntVar(&c.maxTokens, "max-tokens", model.DefaultMaxTokens, "largest output per model request")
	fs.IntVar(&c.maxTurns, "max-turns", orchestrator.DefaultMaxTurns, "model requests per user message before the turn stops")
	fs.IntVar(&c.thinkingBudget, "thinking-budget", 0, "extended thinking budget in tokens (0: off)")
	fs.StringVar(&c.executor, "executor", "", `executor address: "host:port", "unix:///path", a pool as "host1:port,host2:port" or "dns:///name:port" (every address the name resolves to); empty runs one in-process`)
	fs.DurationVar(&c.resumeWindow, "resume-window", orchestrator.DefaultResumeWindow, "how long a turn keeps trying to resume a broken executor stream before its unfinished calls are reported interrupted (capped by the executor's --retention); then, with a single --executor, how long it keeps trying to reach it again")
	fs.StringVar(&c.settings, "settings", "", "settings file, or inline JSON starting with '{' (permissions and hooks, in the shape of Claude Code's settings.json); -p layers it over ~/.claude/settings.json, .claude/settings.json and .claude/settings.local.json")
	fs.StringVar(&c.sessionsDir, "sessions-dir", "", "directory of session transcripts (default $XDG_STATE_HOME/toolwire/sessions or ~/.local/state/toolwire/sessions)")
	fs.StringVar(&c.root, "root", ".", "workspace root of the in-process executor")
	fs.StringVar(&c.sandbox, "sandbox", sandbox.BackendLandlock, `in-process executor confinement: "landlock" or "none"`)
	fs.StringVar(&c.network, "network", embedded.DefaultNetwork, `in-process executor network: "host" (the machine's, as your shell has it), "allowlist" (only --allowed-domains, through an egress proxy; needs root or CAP_SYS_ADMIN) or "none" (loopback only; needs root or CAP_SYS_ADMIN)`)
	fs.Var(&c.allowedDomains, "allowed-domains", `with --network allowlist: hosts Bash may reach, e.g. "*.npmjs.org,pypi.org:443" ("*.d" covers subdomains of d, ":PORT" one port; repeatable; sandbox.network.allowedDomains of --settings adds to them)`)
	fs.Var(&c.deniedDomains, "denied-domains", "with --network allowlist: hosts never reached; with --network host: hosts WebFetch never fetches from (repeatable)")
	fs.Var(&c.allowedAddrs, "allowed-addresses", `with --network allowlist or host: loopback, private or link-local ranges that allowed hosts may resolve to, for the egress proxy and WebFetch, e.g. "10.1.2.0/24" (repeatable)`)
	fs.DurationVar(&c.fetchTimeout, "web-fetch-timeout", tool.DefaultWebFetchTimeout, "how long one WebFetch of the in-process executor may take: connecting, redirects and reading the page")
	fs.StringVar(&c.webFetchModel, "web-fetch-model", model.DefaultSmallModel, "small, fast model that answers a WebFetch call's prompt from the fetched page")
	fs.BoolVar(&c.webSearch, "web-search", false, "offer the Messages API's server-side web search tool (web_search_20250305) to the model; the API runs the searches")
	fs.Var(&c.searchAllowed, "web-search-allowed-domains", "with --web-search: the only domains search results may come from (repeatable; not with --web-search-blocked-domains)")
	fs.Var(&c.searchBlocked, "web-search-blocked-domains", "with --web-search: domains search results never come from (repeatable)")
	fs.IntVar(&c.searchMaxUses, "web-search-max-uses", 0, "with --web-search: most searches per model request (0: the API's limit)")
	fs.Var(&c.addDirs, "add-dir", "extra directory the tools may read and write, file tools and Bash alike, besides the workspace (repeatable; in-process executor)")
	fs.Var(&c.sandboxRead, "sandbox-read", "extra directory Bash may read and execute (repeatable; in-process executor; Bash reads everything but the deny list already)")
	fs.Var(&c.sandboxWrite, "sandbox-write", "extra directory Bash may write, the file tools may not (repeatable; in-process executor)")
	fs.StringVar(&c.runAs, "run-as", "", "user the in-process executor runs tools as (default: the user running orchestrator, so tools can change your files; a remote toolsvc drops to an unprivileged user by default)")
	fs.BoolVar(&c.subagentsOnPool, "subagents-on-pool", false, "with a pool --executor: run each subagent (the Agent tool) on an executor session of its own, placed on the pool, so independent subagents run on separate executors in parallel (each then works in its executor's workspace); without it subagents share the conversation's executor session")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: json or text")
	fs.StringVar(&c.logLevel, "log-level", defaultLogLevel, "log level: debug, info, warn, error")
	c.executorSecurity = rpcauth.RegisterClientFlags(fs, "executor-")
	c.executorTransport = rpcserver.RegisterTransportFlags(fs, "executor-", "to a remote executor")
}

func (c *common) executorAddr() string {
	if c.executor == "" {
		return embeddedAddr
	}
	return c.executor
}

// embeddedConfig is the in-process executor's configuration: that of every
// embedded executor (embedded.Local), tools running as the caller unless
// --run-as says otherwise, with setup errors naming this command's flags.
func (c *common) embeddedConfig(log *slog.Logger) embedded.Config {
	// Saved outputs live beside the transcripts, in <sessions-dir>/<id>/,
	// and go when the conversation is removed.
	outputs, _ := c.sessionsDirectory()
	return embedded.Local(embedded.Config{
		Root:            c.root,
		OutputRoot:      outputs,
		AddDirs:         c.addDirs,
		SandboxSettings: c.sandboxSettings,
		Version:         version,
		Logger:          log,
		Egress:          c.egress,
		Sandbox: sandbox.Config{
			Backend: c.sandbox, Network: c.network, RunAsUser: c.runAs, Logger: log,
			ReadOnlyPaths: c.sandboxRead, ReadWritePaths: c.sandboxWrite,
		},
		Explain: setupHints.Explain,
		Limits:  embeddedLimits(c.limits, c.fetchTimeout),
		// Zero (none of the variables) is the executor's default.
		MaxConcurrency: c.limits.MaxConcurrency,
	})
}

// embeddedLimits are the Bash timeouts of the in-process executor, which
// orchestrator has no flags for: those of Claude Code's variables, else
// the defaults; and WebFetch's timeout (--web-fetch-timeout).
func embeddedLimits(l ccenv.Limits, fetchTimeout time.Duration) tool.Limits {
	d, m := l.Timeouts(0, 0, tool.DefaultTimeout, tool.DefaultMaxTimeout)
	return tool.Limits{DefaultTimeout: d, MaxTimeout: m, WebFetchTimeout: fetchTimeout}
}

// checkSandboxFlags fails early on values of --sandbox and --network that
// mean nothing.
func (c *common) checkSandboxFlags() error {
	if c.sandbox != sandbox.BackendLandlock && c.sandbox != sandbox.BackendNone {
		return fmt.Errorf("--sandbox must be %q or %q, not %q", sandbox.BackendLandlock, sandbox.BackendNone, c.sandbox)
	}
	switch c.network {
	case sandbox.NetworkHost, sandbox.NetworkAllowlist, sandbox.NetworkNone:
	default:
		return fmt.Errorf("--network must be %q, %q or %q, not %q", sandbox.NetworkHost, sandbox.NetworkAllowlist, sandbox.NetworkNone, c.network)
	}
	return nil
}

// checkEgress parses the allowlist flags of the in-process executor:
// --allowed-domains needs --network allowlist; --denied-domains and
// --allowed-addresses apply to host too, where they bound WebFetch.
func (c *common) checkEgress() error {
	if c.network != sandbox.NetworkAllowlist {
		flags := map[string]listFlag{"allowed-domains": c.allowedDomains, "denied-domains": c.deniedDomains, "allowed-addresses": c.allowedAddrs}
		if c.network == sandbox.NetworkHost {
			flags = map[string]listFlag{"allowed-domains": c.allowedDomains}
		}
		for name, f := range flags {
			if len(f) > 0 {
				return fmt.Errorf("--%s applies to --network %s, not %q", name, networksOf(name), c.network)
			}
		}
		if c.network != sandbox.NetworkHost {
			return nil
		}
	}
	p, err := egress.NewPolicy(c.allowedDomains, c.deniedDomains, c.allowedAddrs)
	if err != nil {
		return fmt.Errorf("--network %s: %w", c.network, err)
	}
	c.egress = p
	return nil
}

// checkWeb checks the web search flags and keeps the search tool's
// configuration.
func (c *common) checkWeb() error {
	if strings.TrimSpace(c.webFetchModel) == "" {
		return usagef("--web-fetch-model must name a model")
	}
	if !c.webSearch {
		if len(c.searchAllowed) > 0 || len(c.searchBlocked) > 0 || c.searchMaxUses != 0 {
			return usagef("--web-search-allowed-domains, --web-search-blocked-domains and --web-search-max-uses need --web-search")
		}
		return nil
	}
	if len(c.searchAllowed) > 0 && len(c.searchBlocked) > 0 {
		return usagef("--web-search-allowed-domains and --web-search-blocked-domains exclude each other (the API takes one list)")
	}
	if c.searchMaxUses < 0 {
		return usagef("--web-search-max-uses must not be negative")
	}
	c.webSearchCfg = &model.WebSearch{MaxUses: c.searchMaxUses, AllowedDomains: c.searchAllowed, BlockedDomains: c.searchBlocked}
	return nil
}

// checkExecutorSecurity fails early when the --executor-* security flags
// cannot connect to a remote --executor (bad files, plaintext TCP without
// --executor-insecure).
func (c *common) checkExecutorSecurity() error {
	if c.executor == "" {
		return nil
	}
	if err := c.executorTransport.Validate(); err != nil {
		return fmt.Errorf("--executor-grpc-*: %w", err)
	}
	_, err := c.executorSecurity.DialOptions(c.executor)
	return err
}

// modelClient builds the model client from the environment and flags.
func (c *common) modelClient(getenv func(string) string, log *slog.Logger) (*model.Client, error) {
	cfg := model.ConfigFromEnv(getenv) // ANTHROPIC_MODEL, under --model
	if c.model != "" {
		cfg.Model = c.model
	}
	cfg.MaxTokens = c.maxTokens
	cfg.ThinkingBudget = c.thinkingBudget
	cfg.Logger = log
	return model.New(cfg)
}

// sessionsDirectory returns the directory of the transcripts.
func (c *common) sessionsDirectory() (string, error) {
	if c.sessionsDir != "" {
		return c.sessionsDir, nil
	}
	return transcript.DefaultDir()
}

// store opens the transcript store.
func (c *common) store() (*transcript.Store, error) {
	dir, err := c.sessionsDirectory()
	if err != nil {
		return nil, err
	}
	st, err := transcript.Open(dir, transcript.Options{})
	if err != nil {
		return nil, fmt.Errorf("--sessions-dir: %w", err)
	}
	return st, nil
}

// parseInterleaved parses flags that may come before and after positional
// arguments ("-p 'prompt' --max-turns 3") and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// networksOf names the networks an egress flag applies to.
func networksOf(flag string) string {
	if flag == "allowed-domains" {
		return "allowlist"
	}
	return "allowlist or host"
}
