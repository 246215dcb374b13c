package transcript

import (
	"encoding/json"
	"fmt"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

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

func (c *Config) readUnversioned(s storedConfig) error {
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
