package hook_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/hook"
)

func TestMatcher(t *testing.T) {
	tests := map[string]struct {
		matcher string
		tool    string
		want    bool
	}{
		"empty matches all":             {"", "Bash", true},
		"star matches all":              {"*", "mcp__github__create_issue", true},
		"exact":                         {"Bash", "Bash", true},
		"exact is case-sensitive":       {"bash", "Bash", false},
		"exact is not a substring":      {"Edit", "MultiEdit", false},
		"exact is not a prefix":         {"Read", "ReadFile", false},
		"alternatives first":            {"Edit|Write", "Edit", true},
		"alternatives second":           {"Edit|Write", "Write", true},
		"alternatives miss":             {"Edit|Write", "Read", false},
		"alternatives whole names only": {"Edit|Write", "MultiEdit", false},
		"regex prefix":                  {"Notebook.*", "NotebookEdit", true},
		"regex anchored at start":       {"Edit.*", "MultiEdit", false},
		"regex anchored at end":         {"Multi", "MultiEdit", false},
		"regex mcp":                     {"mcp__github__.*", "mcp__github__create_issue", true},
		"regex mcp other server":        {"mcp__github__.*", "mcp__gitlab__create_issue", false},
		"regex alternation anchored":    {"Read|Gr.p", "Grep", true},
		"regex alternation no partial":  {"Read|Gr.p", "ReadX", false},
		"regex class":                   {"[BG]\\w+", "Bash", true},
		"dash literal":                  {"my-tool", "my-tool", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := hook.Command{Command: "true"}
			s, err := hook.Compile([]hook.Matcher{{Event: hook.PreToolUse, Matcher: tc.matcher, Commands: []hook.Command{cmd}}})
			if err != nil {
				t.Fatal(err)
			}
			got := len(s.Matching(hook.PreToolUse, tc.tool)) == 1
			if got != tc.want {
				t.Errorf("matcher %q on %q = %v, want %v", tc.matcher, tc.tool, got, tc.want)
			}
			if n := len(s.Matching(hook.PostToolUse, tc.tool)); n != 0 {
				t.Errorf("PreToolUse matcher matched at PostToolUse: %d commands", n)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	ok := []hook.Command{{Command: "true"}}
	tests := map[string]struct {
		m    hook.Matcher
		want string
	}{
		"bad regex":        {hook.Matcher{Event: hook.PreToolUse, Matcher: "Bash(", Commands: ok}, `"Bash("`},
		"bad regex class":  {hook.Matcher{Event: hook.PostToolUse, Matcher: "[Edit", Commands: ok}, `"[Edit"`},
		"unknown event":    {hook.Matcher{Event: 0, Matcher: "Bash", Commands: ok}, "unknown event"},
		"empty command":    {hook.Matcher{Event: hook.PreToolUse, Matcher: "Bash", Commands: []hook.Command{{Command: "  "}}}, "command 0 is empty"},
		"negative timeout": {hook.Matcher{Event: hook.PreToolUse, Commands: []hook.Command{{Command: "x", Timeout: -time.Second}}}, "negative timeout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := hook.Compile([]hook.Matcher{{Event: hook.PreToolUse, Matcher: "Read", Commands: ok}, tc.m})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error = %v, want one containing %s", err, tc.want)
			}
		})
	}
}

func TestMatchingOrderAndDuplicates(t *testing.T) {
	s, err := hook.Compile([]hook.Matcher{
		{Event: hook.PreToolUse, Matcher: "Bash", Commands: []hook.Command{{Command: "a", Timeout: time.Second}, {Command: "b"}}},
		{Event: hook.PostToolUse, Matcher: "*", Commands: []hook.Command{{Command: "post"}}},
		{Event: hook.PreToolUse, Matcher: "*", Commands: []hook.Command{{Command: "c"}, {Command: "a", Timeout: time.Minute}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Matching(hook.PreToolUse, "Bash")
	want := []hook.Command{{Command: "a", Timeout: time.Second}, {Command: "b"}, {Command: "c"}}
	if !slices.Equal(got, want) {
		t.Errorf("Matching(Bash) = %v, want %v", got, want)
	}
	if got := s.Matching(hook.PreToolUse, "Read"); !slices.Equal(got, []hook.Command{{Command: "c"}, {Command: "a", Timeout: time.Minute}}) {
		t.Errorf("Matching(Read) = %v", got)
	}
	if !s.Has(hook.PostToolUse) || !s.Has(hook.PreToolUse) {
		t.Error("Has = false for a configured event")
	}
	var none *hook.Set
	if none.Matching(hook.PreToolUse, "Bash") != nil || none.Has(hook.PreToolUse) {
		t.Error("nil Set has hooks")
	}
}

func TestParseEvent(t *testing.T) {
	for _, ev := range []hook.Event{hook.PreToolUse, hook.PostToolUse} {
		got, err := hook.ParseEvent(ev.String())
		if err != nil || got != ev {
			t.Errorf("ParseEvent(%q) = %v, %v", ev.String(), got, err)
		}
	}
	if _, err := hook.ParseEvent("Stop"); err == nil {
		t.Error("ParseEvent(Stop) succeeded")
	}
}
