package orchestrator

import (
	"encoding/json"
	"fmt"

	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// storedVersion is the form of the configuration in transcripts: 1 keeps
// settings in the shape of Claude Code's settings files and options by
// name. Transcripts written before it (no version) hold both as the
// protojson of the executor's wire messages; they are still read.
const storedVersion = 1

// storedConfig is SessionConfig as persisted in a transcript.
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
func (c SessionConfig) MarshalJSON() ([]byte, error) {
	s := storedConfig{
		Version:  storedVersion,
		Executor: c.Executor, Pool: c.Pool, Model: c.Model, SystemPrompt: c.SystemPrompt, AppendSystem: c.AppendSystemPrompt,
		MaxTokens: c.MaxTokens, MaxTurns: c.MaxTurns, AllowedTools: c.AllowedTools, DisallowedTools: c.DisallowedTools,
		Workspace: c.Workspace, ThinkingBudget: c.ThinkingBudget, Directory: c.Directory,
	}
	var err error
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
func (c *SessionConfig) UnmarshalJSON(data []byte) error {
	var s storedConfig
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*c = SessionConfig{
		Executor: s.Executor, Pool: s.Pool, Model: s.Model, SystemPrompt: s.SystemPrompt, AppendSystemPrompt: s.AppendSystem,
		MaxTokens: s.MaxTokens, MaxTurns: s.MaxTurns, AllowedTools: s.AllowedTools, DisallowedTools: s.DisallowedTools,
		Workspace: s.Workspace, ThinkingBudget: s.ThinkingBudget, Directory: s.Directory,
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

// The configuration of transcripts written before storedVersion: settings
// and options as the protojson of executorv1.Settings and SessionOptions
// (field names in lowerCamelCase, enums by name, durations as "5s").

type unversionedSettings struct {
	Allow []string `json:"allow"`
	Ask   []string `json:"ask"`
	Deny  []string `json:"deny"`
	Mode  string   `json:"mode"`
	Hooks []struct {
		Event    string `json:"event"`
		Matcher  string `json:"matcher"`
		Commands []struct {
			Command string `json:"command"`
			Timeout string `json:"timeout"`
		} `json:"commands"`
	} `json:"hooks"`
}

type unversionedOptions struct {
	ResultOrder       string `json:"resultOrder"`
	SiblingAbort      string `json:"siblingAbort"`
	MaxConcurrency    int    `json:"maxConcurrency"`
	DefaultTimeout    string `json:"defaultTimeout"`
	PermissionTimeout string `json:"permissionTimeout"`
}

var unversionedModes = map[string]permission.Mode{
	"": "", "PERMISSION_MODE_UNSPECIFIED": "",
	"PERMISSION_MODE_DEFAULT":            permission.ModeDefault,
	"PERMISSION_MODE_ACCEPT_EDITS":       permission.ModeAcceptEdits,
	"PERMISSION_MODE_PLAN":               permission.ModePlan,
	"PERMISSION_MODE_BYPASS_PERMISSIONS": permission.ModeBypass,
}

var unversionedEvents = map[string]settings.Event{
	"HOOK_EVENT_PRE_TOOL_USE":  settings.PreToolUse,
	"HOOK_EVENT_POST_TOOL_USE": settings.PostToolUse,
}

func (c *SessionConfig) readUnversioned(s storedConfig) error {
	if len(s.Settings) > 0 {
		var in unversionedSettings
		if err := json.Unmarshal(s.Settings, &in); err != nil {
			return fmt.Errorf("decode settings: %w", err)
		}
		mode, ok := unversionedModes[in.Mode]
		if !ok {
			return fmt.Errorf("decode settings: unknown permission mode %q", in.Mode)
		}
		set := settings.Settings{Permissions: settings.Permissions{Allow: in.Allow, Ask: in.Ask, Deny: in.Deny, DefaultMode: mode}}
		for i, h := range in.Hooks {
			ev, ok := unversionedEvents[h.Event]
			if !ok {
				return fmt.Errorf("decode settings: hooks[%d]: unknown event %q", i, h.Event)
			}
			m := settings.HookMatcher{Matcher: h.Matcher}
			for _, cmd := range h.Commands {
				timeout, err := parseDuration(cmd.Timeout)
				if err != nil {
					return fmt.Errorf("decode settings: hooks[%d]: %w", i, err)
				}
				m.Hooks = append(m.Hooks, settings.HookCommand{Command: cmd.Command, Timeout: timeout})
			}
			if set.Hooks == nil {
				set.Hooks = map[settings.Event][]settings.HookMatcher{}
			}
			set.Hooks[ev] = append(set.Hooks[ev], m)
		}
		c.Settings = &set
	}
	if len(s.Options) > 0 {
		var in unversionedOptions
		if err := json.Unmarshal(s.Options, &in); err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
		o := execapi.SessionOptions{
			ResultOrder:    execapi.OrderToolUse,
			NoSiblingAbort: in.SiblingAbort == "SIBLING_ABORT_DISABLED",
			MaxConcurrency: in.MaxConcurrency,
		}
		if in.ResultOrder == "RESULT_ORDER_COMPLETION" {
			o.ResultOrder = execapi.OrderCompletion
		}
		var err error
		if o.DefaultTimeout, err = parseDuration(in.DefaultTimeout); err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
		if o.PermissionTimeout, err = parseDuration(in.PermissionTimeout); err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
		c.Options = &o
	}
	return nil
}
