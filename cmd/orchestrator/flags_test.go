package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

func TestSplitRules(t *testing.T) {
	tests := map[string][]string{
		"Read":                            {"Read"},
		"Read,Edit":                       {"Read", "Edit"},
		"Read Edit":                       {"Read", "Edit"},
		"Bash(git log:*) Edit":            {"Bash(git log:*)", "Edit"},
		"Bash(npm run test:*),Read(./**)": {"Bash(npm run test:*)", "Read(./**)"},
		" , ":                             nil,
	}
	for in, want := range tests {
		if got := splitRules(in); !reflect.DeepEqual(got, want) {
			t.Errorf("splitRules(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	p := fs.Bool("p", false, "")
	n := fs.Int("max-turns", 0, "")
	pos, err := parseInterleaved(fs, []string{"-p", "hello", "world", "--max-turns", "3", "--", "-x"})
	if err != nil || !*p || *n != 3 || !reflect.DeepEqual(pos, []string{"hello", "world", "-x"}) {
		t.Fatalf("p=%v n=%d pos=%q err=%v", *p, *n, pos, err)
	}
}

func TestLoadSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{
  "model": "ignored",
  "permissions": {"allow": ["Read", "Bash(git status)"], "deny": ["Bash(rm:*)"], "ask": ["Write"], "defaultMode": "acceptEdits"},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check.sh", "timeout": 5}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "ignored"}]}]
  }
}`)
	s, err := (&common{settings: good}).loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	p := s.Permissions
	if !reflect.DeepEqual(p.Allow, []string{"Read", "Bash(git status)"}) || p.Deny[0] != "Bash(rm:*)" || p.Ask[0] != "Write" ||
		p.DefaultMode != permission.ModeAcceptEdits {
		t.Fatalf("settings = %+v", s)
	}
	pre := s.Hooks[settings.PreToolUse]
	if len(s.Hooks) != 1 || len(pre) != 1 || pre[0].Matcher != "Bash" ||
		pre[0].Hooks[0].Command != "check.sh" || pre[0].Hooks[0].Timeout != 5*time.Second {
		t.Fatalf("hooks = %+v", s.Hooks)
	}

	for name, tc := range map[string]struct{ content, want string }{
		"syntax":   {"{\n  \"permissions\": {\n    \"allow\": [\"Read\",]\n  }\n}", ".json:3:"},
		"type":     {"{\n\"permissions\": {\"allow\": \"Read\"}}", ".json:2:"},
		"mode":     {`{"permissions": {"defaultMode": "yolo"}}`, "yolo"},
		"hooktype": {`{"hooks": {"PostToolUse": [{"hooks": [{"type": "prompt", "command": "x"}]}]}}`, "not supported"},
	} {
		_, err := (&common{settings: write(name+".json", tc.content)}).loadSettings()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, tc.want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	env := func(string) string { return "" }
	if code := run(nil, nil, io.Discard, io.Discard, env); code != 2 {
		t.Fatalf("no arguments: exit %d", code)
	}
	if code := run([]string{"frobnicate"}, nil, io.Discard, io.Discard, env); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
	if code := run([]string{"-p", "x", "--output-format", "yaml"}, nil, io.Discard, io.Discard, env); code == 0 {
		t.Fatal("bad output format accepted")
	}
}

func TestCheckToolNames(t *testing.T) {
	var defs []execapi.ToolInfo
	for _, name := range []string{"Bash", "Read", "TaskOutput", "TaskStop"} {
		defs = append(defs, execapi.ToolInfo{Spec: tool.Spec{Name: name}})
	}
	offer, hide, err := checkToolNames(defs, []string{"Read", "BashOutput", "default"}, []string{"Bash(git log:*)", "KillShell"}, []string{"Bash", "Read(./.env)", "KillShell"})
	if err != nil || !reflect.DeepEqual(offer, []string{"Read", "TaskOutput"}) || !reflect.DeepEqual(hide, []string{"Bash", "TaskStop"}) {
		t.Fatalf("offer %q, hide %q, %v", offer, hide, err)
	}
	// MCP tools are taken as written: their servers start with the session.
	offer, hide, err = checkToolNames(defs, []string{"Read", "mcp__ex__echo"}, []string{"mcp__ex"}, []string{"mcp__ex__crash", "mcp__gh__*", "mcp__gh__x(y)"})
	if err != nil || !reflect.DeepEqual(offer, []string{"Read", "mcp__ex__echo"}) || !reflect.DeepEqual(hide, []string{"mcp__ex__crash", "mcp__gh__*"}) {
		t.Fatalf("MCP names: offer %q, hide %q, %v", offer, hide, err)
	}
	for name, tc := range map[string]struct {
		tools, allowed, disallowed []string
		want                       string
	}{
		"unknown tool":          {tools: []string{"Grep"}, want: `--tools: unknown tool "Grep" (the executor has Bash, Read, TaskOutput, TaskStop)`},
		"rule in --tools":       {tools: []string{"Bash(ls)"}, want: "--tools: \"Bash(ls)\" is a rule"},
		"unknown rule tool":     {allowed: []string{"WebFetch(domain:x.com)"}, want: `--allowedTools: unknown tool "WebFetch" in "WebFetch(domain:x.com)"`},
		"malformed rule":        {allowed: []string{"Bash(ls"}, want: `--allowedTools: rule "Bash(ls": missing ")"`},
		"unknown disallowed":    {disallowed: []string{"Task"}, want: `--disallowedTools: unknown tool "Task"`},
		"malformed disallowed ": {disallowed: []string{"Read)"}, want: `--disallowedTools: rule "Read)"`},
	} {
		_, _, err := checkToolNames(defs, tc.tools, tc.allowed, tc.disallowed)
		var ue usageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a usage error starting %q", name, err, tc.want)
		}
	}
}
