package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// parseMode reads a permission mode name; empty is an error.
func parseMode(name string) (permission.Mode, error) {
	m, err := permission.ParseMode(name)
	if err != nil {
		return "", err
	}
	if m == "" {
		return "", fmt.Errorf("empty permission mode (use default, acceptEdits, plan or bypassPermissions)")
	}
	return m, nil
}

// modeName returns the name of a session's permission mode, "default"
// when none is set.
func modeName(s *settings.Settings) string {
	if s == nil || s.Permissions.DefaultMode == "" {
		return string(permission.ModeDefault)
	}
	return string(s.Permissions.DefaultMode)
}

// settingsSource reads the value of --settings: inline JSON when it starts
// with "{", else the path of a settings file. Its mistakes are usage
// errors.
func settingsSource(value string) (settings.Source, error) {
	if strings.HasPrefix(strings.TrimSpace(value), "{") {
		return settings.Source{Name: "--settings", Data: []byte(value)}, nil
	}
	data, err := os.ReadFile(value)
	if err != nil {
		return settings.Source{}, usagef("--settings: %w", err)
	}
	return settings.Source{Name: value, Data: data}, nil
}

// loadSettings reads --settings (a file or inline JSON, Claude Code's
// settings.json shape) for the sessions to pass to the executor, and keeps
// its sandbox lists for the in-process executor; an empty value gives
// empty settings. A malformed file is refused with the line of the
// mistake.
func (c *common) loadSettings() (*settings.Settings, error) {
	if c.settings == "" {
		return &settings.Settings{}, nil
	}
	src, err := settingsSource(c.settings)
	if err != nil {
		return nil, err
	}
	s, err := settings.Merge(src)
	if err != nil {
		return nil, err
	}
	c.sandboxSettings = s.Sandbox
	if c.executor == "" {
		// The in-process executor has the network lists as its own
		// (operator's) policy already; as a session's they would narrow
		// --allowed-domains down to the file's list.
		s.Sandbox.Network = settings.Network{}
	}
	return &s, nil
}

// userConfigDir is Claude Code's configuration directory: $CLAUDE_CONFIG_DIR,
// else ~/.claude ("" when there is no home).
func userConfigDir(getenv func(string) string) string {
	if d := getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".claude")
	}
	return ""
}

// permissionFlags are the flags of one run that change permissions.
type permissionFlags struct {
	settings   string   // --settings
	mode       string   // --permission-mode
	allowed    []string // --allowedTools
	disallowed []string // --disallowedTools
}

// runSettings gathers the permission and sandbox settings of a headless run as Claude
// Code does: the user's, the project's and the project's local settings
// files, then --settings, then the permission flags on top (their rules
// added to the files' rules, the mode replacing theirs). A mistake in a
// settings file is an error naming the file and line; one in a flag is a
// usage error naming the value.
func runSettings(userDir, projectDir string, f permissionFlags) (*settings.Settings, settings.Sandbox, error) {
	for _, l := range []struct {
		flag  string
		rules []string
	}{{"--allowedTools", f.allowed}, {"--disallowedTools", f.disallowed}} {
		for _, r := range l.rules {
			if _, err := permission.ParseRule(r); err != nil {
				return nil, settings.Sandbox{}, usagef("%s: rule %q: %w", l.flag, r, err)
			}
		}
	}
	var mode permission.Mode
	if f.mode != "" {
		var err error
		if mode, err = parseMode(f.mode); err != nil {
			return nil, settings.Sandbox{}, usagef("--permission-mode: %w", err)
		}
	}
	sources, err := settings.Discover(userDir, projectDir)
	if err != nil {
		return nil, settings.Sandbox{}, err
	}
	if f.settings != "" {
		src, err := settingsSource(f.settings)
		if err != nil {
			return nil, settings.Sandbox{}, err
		}
		if _, err := settings.Merge(src); err != nil {
			return nil, settings.Sandbox{}, usageError{err}
		}
		sources = append(sources, src)
	}
	merged, err := settings.Merge(sources...)
	if err != nil {
		return nil, settings.Sandbox{}, err
	}
	s := merged
	s.Permissions.Allow = appendNew(s.Permissions.Allow, f.allowed)
	s.Permissions.Deny = appendNew(s.Permissions.Deny, f.disallowed)
	if mode != "" {
		s.Permissions.DefaultMode = mode
	}
	return &s, merged.Sandbox, nil
}

// appendNew appends the rules of add that list does not hold yet.
func appendNew(list, add []string) []string {
	for _, r := range add {
		if !slices.Contains(list, r) {
			list = append(list, r)
		}
	}
	return list
}

// checkToolNames makes sure every tool the flags name is one the executor
// has (by name or alias): --tools takes names, --allowedTools and
// --disallowedTools rules. It returns the --tools names and the tools
// bare --disallowedTools names hide, as the executor names them.
func checkToolNames(defs []execapi.ToolInfo, tools, allowed, disallowed []string) (offer, hide []string, err error) {
	known := map[string]string{} // name or alias -> name
	var names []string
	for _, d := range defs {
		known[d.Name] = d.Name
		names = append(names, d.Name)
		for _, a := range d.Aliases {
			known[a] = d.Name
		}
	}
	unknown := func(flag, name, in string) error {
		where := ""
		if in != name {
			where = fmt.Sprintf(" in %q", in)
		}
		return usagef("%s: unknown tool %q%s (the executor has %s)", flag, name, where, strings.Join(names, ", "))
	}
	for _, t := range tools {
		if t == "default" {
			continue
		}
		if strings.HasPrefix(t, "mcp__") {
			// MCP tools are known once the session's servers started.
			offer = append(offer, t)
			continue
		}
		if strings.ContainsAny(t, "()") {
			return nil, nil, usagef("--tools: %q is a rule; --tools takes tool names (put rules in --allowedTools or --disallowedTools)", t)
		}
		name, ok := known[t]
		if !ok {
			if r, err := permission.ParseRule(t); err == nil {
				name, ok = known[r.Tool] // an older name (BashOutput)
			}
		}
		if !ok {
			return nil, nil, unknown("--tools", t, t)
		}
		offer = append(offer, name)
	}
	for _, l := range []struct {
		flag  string
		rules []string
	}{{"--allowedTools", allowed}, {"--disallowedTools", disallowed}} {
		for _, text := range l.rules {
			r, err := permission.ParseRule(text)
			if err != nil {
				return nil, nil, usagef("%s: rule %q: %w", l.flag, text, err)
			}
			written, _, _ := strings.Cut(strings.TrimSpace(text), "(")
			if strings.HasPrefix(written, "mcp__") {
				// An MCP tool or server: known once the session's servers
				// started, so taken as written.
				if l.flag == "--disallowedTools" && r.Specifier == "" && !strings.Contains(text, "(") {
					hide = append(hide, written)
				}
				continue
			}
			name, ok := known[written]
			if !ok {
				if name, ok = known[r.Tool]; !ok {
					return nil, nil, unknown(l.flag, written, text)
				}
			}
			if l.flag == "--disallowedTools" && r.Specifier == "" && !strings.Contains(text, "(") {
				hide = append(hide, name)
			}
		}
	}
	return offer, hide, nil
}
