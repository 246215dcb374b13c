package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
)

// settingsFile is the part of a Claude Code style settings.json the
// orchestrator passes on to executors. Unknown keys are ignored.
type settingsFile struct {
	Permissions struct {
		Allow       []string `json:"allow"`
		Ask         []string `json:"ask"`
		Deny        []string `json:"deny"`
		DefaultMode string   `json:"defaultMode"`
	} `json:"permissions"`
	Hooks map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type    string  `json:"type"`
			Command string  `json:"command"`
			Timeout float64 `json:"timeout"` // seconds
		} `json:"hooks"`
	} `json:"hooks"`
}

var permissionModes = map[string]executorv1.PermissionMode{
	"":                  executorv1.PermissionMode_PERMISSION_MODE_UNSPECIFIED,
	"default":           executorv1.PermissionMode_PERMISSION_MODE_DEFAULT,
	"acceptEdits":       executorv1.PermissionMode_PERMISSION_MODE_ACCEPT_EDITS,
	"plan":              executorv1.PermissionMode_PERMISSION_MODE_PLAN,
	"bypassPermissions": executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS,
}

var hookEvents = map[string]executorv1.HookEvent{
	"PreToolUse":  executorv1.HookEvent_HOOK_EVENT_PRE_TOOL_USE,
	"PostToolUse": executorv1.HookEvent_HOOK_EVENT_POST_TOOL_USE,
}

// parseMode converts a permission mode name.
func parseMode(name string) (executorv1.PermissionMode, error) {
	m, ok := permissionModes[name]
	if !ok {
		return 0, fmt.Errorf("unknown permission mode %q (use default, acceptEdits, plan or bypassPermissions)", name)
	}
	return m, nil
}

// loadSettings reads a settings file; an empty path gives empty settings.
// A malformed file is refused with the line of the mistake.
func loadSettings(path string) (*executorv1.Settings, error) {
	out := &executorv1.Settings{}
	if path == "" {
		return out, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	var f settingsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("settings %s: %w", path, withLine(data, err))
	}
	out.Allow, out.Ask, out.Deny = f.Permissions.Allow, f.Permissions.Ask, f.Permissions.Deny
	if out.Mode, err = parseMode(f.Permissions.DefaultMode); err != nil {
		return nil, fmt.Errorf("settings %s: permissions.defaultMode: %w", path, err)
	}
	for event, entries := range f.Hooks {
		ev, ok := hookEvents[event]
		if !ok {
			continue // events the executor does not run
		}
		for i, e := range entries {
			h := &executorv1.Hook{Event: ev, Matcher: e.Matcher}
			for j, c := range e.Hooks {
				if c.Type != "" && c.Type != "command" {
					return nil, fmt.Errorf("settings %s: hooks.%s[%d].hooks[%d]: type %q is not supported (only \"command\")", path, event, i, j, c.Type)
				}
				if strings.TrimSpace(c.Command) == "" {
					return nil, fmt.Errorf("settings %s: hooks.%s[%d].hooks[%d]: empty command", path, event, i, j)
				}
				hc := &executorv1.HookCommand{Command: c.Command}
				if c.Timeout > 0 {
					hc.Timeout = durationpb.New(time.Duration(c.Timeout * float64(time.Second)))
				}
				h.Commands = append(h.Commands, hc)
			}
			out.Hooks = append(out.Hooks, h)
		}
	}
	return out, nil
}

// withLine adds the line number to a JSON decoding error.
func withLine(data []byte, err error) error {
	var off int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	default:
		return err
	}
	line := 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}
