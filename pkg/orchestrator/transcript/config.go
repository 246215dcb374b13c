package transcript

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// storedVersion is the form of the configuration in transcripts: 1 keeps
// settings in the shape of Claude Code's settings files and options by
// name. Transcripts written before it (no version) hold both as the
// protojson of the executor's wire messages; they are still read.
const storedVersion = 1

// Config is the configuration of a session, as the orchestrator takes it
// (orchestrator.SessionConfig is this type) and its transcript keeps it.
type Config struct {
	// Executor is the executor address ("embedded" for in-process). For a
	// session placed from a pool it is the member chosen at creation.
	Executor string
	// Pool is the pool address the session was placed from, if any.
	Pool string
	// Model is the model name.
	Model string
	// SystemPrompt replaces the default system prompt.
	SystemPrompt string
	// AppendSystemPrompt is added at the end of the system prompt, the
	// default one or SystemPrompt (orchestrator -p puts CLAUDE.md files
	// and --append-system-prompt here).
	AppendSystemPrompt string
	// MaxTokens caps each response.
	MaxTokens int
	// MaxTurns caps model requests per user message.
	MaxTurns int
	// AllowedTools, when set, are the only tools offered (bare names).
	AllowedTools []string
	// DisallowedTools are never offered (bare names).
	DisallowedTools []string
	// Settings are the permission rules, mode and hooks for the executor.
	// Only those travel: DisableBypass and Sandbox are the executor's own.
	Settings *settings.Settings
	// Workspace is the working directory on the executor.
	Workspace string
	// ThinkingBudget turns on extended thinking with this many tokens.
	ThinkingBudget int
	// Options are the executor's scheduling options.
	Options *execapi.SessionOptions
	// Directory is the directory of the client that created the session,
	// on the client's machine (orchestrator -p's current directory), so
	// that a client can find the latest conversation held in a directory
	// (Store.Latest). The orchestrator does not use it otherwise.
	Directory string
	// MCPServers are the session's own MCP servers, sent in the
	// executor session's Open as they are (${VAR} already expanded by
	// whoever had the right to: orchestrator -p from its user's
	// environment; servers a remote client sends are never expanded).
	MCPServers mcpclient.Servers
	// RequireSandbox are the protections the session's executor must
	// enforce (pkg/handshake's words); one whose Hello lacks one is
	// refused.
	RequireSandbox []string
}

// storedConfig is Config as persisted in a transcript.
type storedConfig struct {
	Version         int             `json:"version,omitempty"`
	Executor        string          `json:"executor,omitempty"`
	Pool            string          `json:"pool,omitempty"`
	Model           string          `json:"model,omitempty"`
	SystemPrompt    string          `json:"system_prompt,omitempty"`
	AppendSystem    string          `json:"append_system_prompt,omitempty"`
	MaxTokens       int             `json:"max_tokens,omitempty"`
	MaxTurns        int             `json:"max_turns,omitempty"`
	AllowedTools    []string        `json:"allowed_tools,omitempty"`
	DisallowedTools []string        `json:"disallowed_tools,omitempty"`
	Settings        json.RawMessage `json:"settings,omitempty"`
	Workspace       string          `json:"workspace,omitempty"`
	ThinkingBudget  int             `json:"thinking_budget,omitempty"`
	Options         json.RawMessage `json:"options,omitempty"`
	Directory       string          `json:"directory,omitempty"`
	MCPServers      json.RawMessage `json:"mcp_servers,omitempty"` // {"mcpServers": ...}, Claude Code's shape
	RequireSandbox  []string        `json:"require_sandbox,omitempty"`
}

// storedSettings is settings.Settings as a transcript keeps it: the part a
// session sends, in the shape of a Claude Code settings file. Unlike a
// settings file it is read back without validation: the executor judges
// the settings, and a transcript must load whatever it holds.
type storedSettings struct {
	Permissions *storedPermissions         `json:"permissions,omitempty"`
	Hooks       map[string][]storedMatcher `json:"hooks,omitempty"`
}

type storedPermissions struct {
	Allow       []string `json:"allow,omitempty"`
	Ask         []string `json:"ask,omitempty"`
	Deny        []string `json:"deny,omitempty"`
	DefaultMode string   `json:"defaultMode,omitempty"`
}

type storedMatcher struct {
	Matcher string       `json:"matcher"`
	Hooks   []storedHook `json:"hooks"`
}

type storedHook struct {
	Type    string  `json:"type"`
	Command string  `json:"command"`
	Timeout float64 `json:"timeout,omitempty"` // seconds
}

func settingsToStored(s settings.Settings) storedSettings {
	var out storedSettings
	if p := s.Permissions; len(p.Allow)+len(p.Ask)+len(p.Deny) > 0 || p.DefaultMode != "" {
		out.Permissions = &storedPermissions{Allow: p.Allow, Ask: p.Ask, Deny: p.Deny, DefaultMode: string(p.DefaultMode)}
	}
	for ev, matchers := range s.Hooks {
		for _, m := range matchers {
			sm := storedMatcher{Matcher: m.Matcher, Hooks: []storedHook{}}
			for _, h := range m.Hooks {
				sm.Hooks = append(sm.Hooks, storedHook{Type: "command", Command: h.Command, Timeout: h.Timeout.Seconds()})
			}
			if out.Hooks == nil {
				out.Hooks = map[string][]storedMatcher{}
			}
			out.Hooks[string(ev)] = append(out.Hooks[string(ev)], sm)
		}
	}
	return out
}

func settingsFromStored(in storedSettings) settings.Settings {
	var s settings.Settings
	if p := in.Permissions; p != nil {
		s.Permissions = settings.Permissions{Allow: p.Allow, Ask: p.Ask, Deny: p.Deny, DefaultMode: permission.Mode(p.DefaultMode)}
	}
	for ev, matchers := range in.Hooks {
		for _, m := range matchers {
			hm := settings.HookMatcher{Matcher: m.Matcher}
			for _, h := range m.Hooks {
				hm.Hooks = append(hm.Hooks, settings.HookCommand{Command: h.Command, Timeout: time.Duration(h.Timeout * float64(time.Second))})
			}
			if s.Hooks == nil {
				s.Hooks = map[settings.Event][]settings.HookMatcher{}
			}
			s.Hooks[settings.Event(ev)] = append(s.Hooks[settings.Event(ev)], hm)
		}
	}
	return s
}

// storedOptions is execapi.SessionOptions as a transcript keeps it.
type storedOptions struct {
	ResultOrder       string `json:"result_order,omitempty"` // "tool_use" (or empty) or "completion"
	NoSiblingAbort    bool   `json:"no_sibling_abort,omitempty"`
	MaxConcurrency    int    `json:"max_concurrency,omitempty"`
	DefaultTimeout    string `json:"default_timeout,omitempty"`
	PermissionTimeout string `json:"permission_timeout,omitempty"`
}

func optionsToStored(o execapi.SessionOptions) storedOptions {
	out := storedOptions{NoSiblingAbort: o.NoSiblingAbort, MaxConcurrency: o.MaxConcurrency}
	if o.ResultOrder == execapi.OrderCompletion {
		out.ResultOrder = "completion"
	}
	if o.DefaultTimeout != 0 {
		out.DefaultTimeout = o.DefaultTimeout.String()
	}
	if o.PermissionTimeout != 0 {
		out.PermissionTimeout = o.PermissionTimeout.String()
	}
	return out
}

func optionsFromStored(in storedOptions) (execapi.SessionOptions, error) {
	o := execapi.SessionOptions{NoSiblingAbort: in.NoSiblingAbort, MaxConcurrency: in.MaxConcurrency}
	switch in.ResultOrder {
	case "", "tool_use":
	case "completion":
		o.ResultOrder = execapi.OrderCompletion
	default:
		return o, fmt.Errorf("unknown result order %q", in.ResultOrder)
	}
	var err error
	if o.DefaultTimeout, err = parseDuration(in.DefaultTimeout); err != nil {
		return o, fmt.Errorf("default_timeout: %w", err)
	}
	if o.PermissionTimeout, err = parseDuration(in.PermissionTimeout); err != nil {
		return o, fmt.Errorf("permission_timeout: %w", err)
	}
	return o, nil
}

// parseDuration reads a duration as Go or protojson writes it ("1m30s",
// "90s", "1.500s"); empty is zero.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// MarshalJSON stores the configuration.
func (c Config) MarshalJSON() ([]byte, error) {
	s := storedConfig{
		Version:  storedVersion,
		Executor: c.Executor, Pool: c.Pool, Model: c.Model, SystemPrompt: c.SystemPrompt, AppendSystem: c.AppendSystemPrompt,
		MaxTokens: c.MaxTokens, MaxTurns: c.MaxTurns, AllowedTools: c.AllowedTools, DisallowedTools: c.DisallowedTools,
		Workspace: c.Workspace, ThinkingBudget: c.ThinkingBudget, Directory: c.Directory,
		RequireSandbox: c.RequireSandbox,
	}
	var err error
	if len(c.MCPServers) > 0 {
		if s.MCPServers, err = json.Marshal(map[string]mcpclient.Servers{"mcpServers": c.MCPServers}); err != nil {
			return nil, fmt.Errorf("encode mcp servers: %w", err)
		}
	}
	if c.Settings != nil {
		if s.Settings, err = json.Marshal(settingsToStored(*c.Settings)); err != nil {
			return nil, fmt.Errorf("encode settings: %w", err)
		}
	}
	if c.Options != nil {
		if s.Options, err = json.Marshal(optionsToStored(*c.Options)); err != nil {
			return nil, fmt.Errorf("encode options: %w", err)
		}
	}
	return json.Marshal(s)
}

// UnmarshalJSON reads a stored configuration, of this version or of the
// one before.
func (c *Config) UnmarshalJSON(data []byte) error {
	var s storedConfig
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*c = Config{
		Executor: s.Executor, Pool: s.Pool, Model: s.Model, SystemPrompt: s.SystemPrompt, AppendSystemPrompt: s.AppendSystem,
		MaxTokens: s.MaxTokens, MaxTurns: s.MaxTurns, AllowedTools: s.AllowedTools, DisallowedTools: s.DisallowedTools,
		Workspace: s.Workspace, ThinkingBudget: s.ThinkingBudget, Directory: s.Directory,
		RequireSandbox: s.RequireSandbox,
	}
	if len(s.MCPServers) > 0 {
		servers, err := mcpclient.Parse(s.MCPServers)
		if err != nil {
			return fmt.Errorf("decode mcp servers: %w", err)
		}
		c.MCPServers = servers
	}
	switch s.Version {
	case 0:
		return c.readUnversioned(s)
	case storedVersion:
	default:
		return fmt.Errorf("configuration of version %d, newer than this orchestrator's %d", s.Version, storedVersion)
	}
	if len(s.Settings) > 0 {
		var st storedSettings
		if err := json.Unmarshal(s.Settings, &st); err != nil {
			return fmt.Errorf("decode settings: %w", err)
		}
		set := settingsFromStored(st)
		c.Settings = &set
	}
	if len(s.Options) > 0 {
		var so storedOptions
		if err := json.Unmarshal(s.Options, &so); err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
		opts, err := optionsFromStored(so)
		if err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
		c.Options = &opts
	}
	return nil
}
