package hook

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// DefaultTimeout is how long a hook command may run when its Timeout is
// zero.
const DefaultTimeout = 60 * time.Second

// Command is one hook command.
type Command struct {
	// Command is a bash command line, run as "/bin/bash -c Command".
	Command string
	// Timeout bounds the command's run; zero means DefaultTimeout.
	Timeout time.Duration
}

func (c Command) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// Matcher is one entry of the hooks section of the settings: the commands
// to run for an event when the tool's name matches.
type Matcher struct {
	// Event is when the commands run.
	Event Event
	// Matcher selects tools by name: empty or "*" matches every tool, a
	// name matches that tool, "A|B" either, and anything else is a regular
	// expression (RE2 syntax) that must match the whole name, so "Notebook.*"
	// matches NotebookEdit and "Edit" does not match MultiEdit.
	Matcher string
	// Commands run, all at once, when the matcher matches.
	Commands []Command
}

// Set is a compiled hooks configuration. Its methods are safe for
// concurrent use; a nil *Set has no hooks.
type Set struct {
	entries []entry
}

// entry is one compiled command with where it came from.
type entry struct {
	event Event
	match func(string) bool
	cmd   Command
	label string // "PreToolUse[Edit|Write] <command>", for logs and traces
}

// Compile checks the matchers and compiles them into a Set. Matchers and
// the commands within them keep their order: it decides which hook wins
// when several rewrite the input.
func Compile(ms []Matcher) (*Set, error) {
	s := &Set{}
	for i, m := range ms {
		if !m.Event.valid() {
			return nil, fmt.Errorf("hook: matcher %d (%q): unknown event %d", i, m.Matcher, int(m.Event))
		}
		match, err := CompileMatcher(m.Matcher)
		if err != nil {
			return nil, fmt.Errorf("hook: %s: %w", m.Event, err)
		}
		for j, c := range m.Commands {
			if strings.TrimSpace(c.Command) == "" {
				return nil, fmt.Errorf("hook: %s matcher %q: command %d is empty", m.Event, m.Matcher, j)
			}
			if c.Timeout < 0 {
				return nil, fmt.Errorf("hook: %s matcher %q: command %q has a negative timeout", m.Event, m.Matcher, c.Command)
			}
			s.entries = append(s.entries, entry{
				event: m.Event,
				match: match,
				cmd:   c,
				label: fmt.Sprintf("%s[%s] %s", m.Event, m.Matcher, c.Command),
			})
		}
	}
	return s, nil
}

// CompileMatcher turns a tool-name matcher into a predicate. Empty or "*"
// matches every tool; names joined by "|" match those names exactly;
// anything else is a regular expression that must match the whole name
// ("Notebook.*").
func CompileMatcher(m string) (func(tool string) bool, error) {
	if m == "" || m == "*" {
		return func(string) bool { return true }, nil
	}
	if isLiteralList(m) {
		names := strings.Split(m, "|")
		return func(tool string) bool {
			for _, n := range names {
				if n == tool {
					return true
				}
			}
			return false
		}, nil
	}
	re, err := regexp.Compile("^(?:" + m + ")$")
	if err != nil {
		return nil, fmt.Errorf("matcher %q is not a valid regular expression: %w", m, err)
	}
	return re.MatchString, nil
}

// isLiteralList reports whether m is tool names separated by "|", which
// need no regular expression.
func isLiteralList(m string) bool {
	for _, r := range m {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '|':
		default:
			return false
		}
	}
	return true
}

// Matching returns the commands that run for tool at ev, in configuration
// order. A command configured more than once (same command line) runs
// once, with the timeout of its first appearance, as in Claude Code.
func (s *Set) Matching(ev Event, tool string) []Command {
	var out []Command
	for _, e := range s.matching(ev, tool) {
		out = append(out, e.cmd)
	}
	return out
}

func (s *Set) matching(ev Event, tool string) []entry {
	if s == nil {
		return nil
	}
	var out []entry
	seen := map[string]bool{}
	for _, e := range s.entries {
		if e.event != ev || !e.match(tool) || seen[e.cmd.Command] {
			continue
		}
		seen[e.cmd.Command] = true
		out = append(out, e)
	}
	return out
}

// Has reports whether any hook is configured for ev, whatever the tool.
func (s *Set) Has(ev Event) bool {
	if s == nil {
		return false
	}
	for _, e := range s.entries {
		if e.event == ev {
			return true
		}
	}
	return false
}
