package settings

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/hook"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/permission"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const full = `{
  "model": "claude-sonnet",
  "env": {"FOO": "bar"},
  "permissions": {
    "allow": ["Bash(npm run test:*)", "Read"],
    "ask": ["Bash(git push:*)"],
    "deny": ["Read(./.env)", "WebFetch(domain:evil.com)"],
    "defaultMode": "acceptEdits",
    "disableBypassPermissionsMode": "disable",
    "additionalDirectories": ["../x"]
  },
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "check.sh"}]}
    ],
    "PostToolUse": [
      {"matcher": "Edit|Write", "hooks": [
        {"type": "command", "command": "gofmt -w x", "timeout": 30},
        {"type": "command", "command": "echo done", "timeout": 0.5}
      ]}
    ],
    "Stop": [{"hooks": [{"type": "prompt", "prompt": "anything"}]}],
    "Notification": "ignored"
  },
  "statusLine": {"type": "command"}
}`

func TestParseSettings(t *testing.T) {
	s, err := ParseSettings([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Permissions: Permissions{
			Allow:         []string{"Bash(npm run test:*)", "Read"},
			Ask:           []string{"Bash(git push:*)"},
			Deny:          []string{"Read(./.env)", "WebFetch(domain:evil.com)"},
			DefaultMode:   permission.ModeAcceptEdits,
			DisableBypass: true,
		},
		Hooks: map[Event][]HookMatcher{
			PreToolUse: {{Matcher: "Bash", Hooks: []HookCommand{{Command: "check.sh"}}}},
			PostToolUse: {{Matcher: "Edit|Write", Hooks: []HookCommand{
				{Command: "gofmt -w x", Timeout: 30 * time.Second},
				{Command: "echo done", Timeout: 500 * time.Millisecond},
			}}},
		},
		Env: map[string]string{"FOO": "bar"},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
	rules := s.Permissions.Rules()
	if _, err := permission.Compile(rules, permission.Rules{}); err != nil {
		t.Fatalf("rules do not compile: %v", err)
	}
	if !rules.DisableBypass || rules.Mode != permission.ModeAcceptEdits {
		t.Errorf("rules %+v", rules)
	}
}

func TestParseSettingsEmpty(t *testing.T) {
	for _, data := range []string{`{}`, `{"permissions": {}}`, `{"hooks": {}}`, "  {\n}\n"} {
		s, err := ParseSettings([]byte(data))
		if err != nil {
			t.Errorf("%q: %v", data, err)
		}
		if len(s.Hooks) != 0 || len(s.Permissions.Allow) != 0 {
			t.Errorf("%q: %+v", data, s)
		}
	}
}

func TestParseSettingsErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string // exact Error()
	}{
		{"empty file", ``, "settings:1:1: invalid JSON: unexpected end of JSON input"},
		{"trailing comma", "{\n  \"permissions\": {\"allow\": [\"Read\",]}\n}", "settings:2:36: invalid JSON: invalid character ']' looking for beginning of value"},
		{"not an object", `["Read"]`, "settings:1:1: the settings must be a JSON object, not a JSON array"},
		{"allow not a list", "{\"permissions\": {\n  \"allow\": \"Read\"}}", "settings:2:12: permissions.allow: a JSON string where a list was expected"},
		{"timeout as string", "{\"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [\n  {\"type\": \"command\", \"command\": \"x\", \"timeout\": \"30\"}]}]}}",
			"settings:2:50: hooks.PreToolUse.hooks.timeout: a JSON string where a number was expected"},
		{"bad rule", "{\n  \"permissions\": {\n    \"allow\": [\"Read\",\n      \"Bash(npm test\"]\n  }\n}",
			`settings:4:7: permissions.allow[1]: rule "Bash(npm test": missing ")" at the end`},
		{"bad deny rule", `{"permissions": {"deny": ["Bash(a && b)"]}}`,
			`settings:1:27: permissions.deny[0]: rule "Bash(a && b)": the command must be one simple command (no ;, &&, |, redirections or syntax errors)`},
		{"bad mode", `{"permissions": {"defaultMode": "yolo"}}`,
			`settings:1:33: permissions.defaultMode: unknown permission mode "yolo" (want default, acceptEdits, plan or bypassPermissions)`},
		{"bad bypass knob", `{"permissions": {"disableBypassPermissionsMode": "yes"}}`,
			`settings:1:50: permissions.disableBypassPermissionsMode: "yes" is not a known value; the only one is "disable"`},
		{"bad matcher", "{\"hooks\": {\"PostToolUse\": [\n {\"matcher\": \"Edit(\", \"hooks\": [{\"type\": \"command\", \"command\": \"x\"}]}]}}",
			"settings:2:14: hooks.PostToolUse[0].matcher: matcher \"Edit(\" is not a valid regular expression: error parsing regexp: missing closing ): `^(?:Edit()$`"},
		{"prompt hook", `{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}}`,
			`settings:1:47: hooks.PreToolUse[0].hooks[0].type: hook type "prompt" is not supported; use "command" (and 1 more problem)`},
		{"no command", `{"hooks": {"PreToolUse": [{"hooks": [{"type": "command"}]}]}}`,
			`settings:1:38: hooks.PreToolUse[0].hooks[0].command: empty command`},
		{"negative timeout", `{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "timeout": -1}]}]}}`,
			`settings:1:85: hooks.PreToolUse[0].hooks[0].timeout: timeout -1 is not a number of seconds between 0 and 86400`},
		{"no hooks", `{"hooks": {"PreToolUse": [{"matcher": "Bash"}]}}`,
			`settings:1:27: hooks.PreToolUse[0].hooks: no hook commands`},
		{"first problem in file order", "{\"permissions\": {\"deny\": [\"Bash(\"],\n \"allow\": [\"Bash(\"]}}",
			`settings:1:27: permissions.deny[0]: rule "Bash(": missing ")" at the end (and 1 more problem)`},
		{"column counts characters", "{\"permissions\": {\"allow\": [\"Bash(echo é)\", \"Bash(\"]}}",
			`settings:1:44: permissions.allow[1]: rule "Bash(": missing ")" at the end`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSettings([]byte(tt.data))
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if err.Error() != tt.want {
				t.Fatalf("got  %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestLoadSettings(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(good, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSettings(good)
	if err != nil || len(s.Permissions.Deny) != 2 {
		t.Fatalf("LoadSettings: %+v, %v", s, err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n  \"permissions\": {\"ask\": [\"(x)\"]}\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadSettings(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+":2:27: permissions.ask[0]: ") {
		t.Fatalf("got %v", err)
	}
	if _, err := LoadSettings(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestValidate(t *testing.T) {
	s := Settings{Hooks: map[Event][]HookMatcher{"Stop": {{Hooks: []HookCommand{{Command: "x"}}}}}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), `event "Stop" is not supported`) {
		t.Errorf("got %v", err)
	}
	s = Settings{Permissions: Permissions{Allow: []string{"Bash(ok)"}, DefaultMode: permission.ModePlan}}
	if err := s.Validate(); err != nil {
		t.Errorf("got %v", err)
	}
	s.Permissions.Ask = []string{"Bash)"}
	if err := s.Validate(); err == nil || err.Error() != `settings: permissions.ask[0]: rule "Bash)": ")" without "("` {
		t.Errorf("got %v", err)
	}
}

func TestCompileMatcher(t *testing.T) {
	tests := []struct {
		matcher string
		yes, no []string
	}{
		{"", []string{"Bash", "Edit"}, nil},
		{"*", []string{"Bash", "mcp__x__y"}, nil},
		{"Bash", []string{"Bash"}, []string{"BashOutput", "bash"}},
		{"Edit|Write", []string{"Edit", "Write"}, []string{"NotebookEdit", "Edit|Write"}},
		{"Notebook.*", []string{"NotebookEdit", "NotebookRead"}, []string{"Edit"}},
		{"mcp__github__.*", []string{"mcp__github__create_issue"}, []string{"mcp__gitlab__x"}},
		{".*Edit", []string{"Edit", "NotebookEdit"}, []string{"Editor"}},
	}
	for _, tt := range tests {
		m, err := hook.CompileMatcher(tt.matcher)
		if err != nil {
			t.Fatalf("%q: %v", tt.matcher, err)
		}
		for _, name := range tt.yes {
			if !m(name) {
				t.Errorf("%q should match %q", tt.matcher, name)
			}
		}
		for _, name := range tt.no {
			if m(name) {
				t.Errorf("%q should not match %q", tt.matcher, name)
			}
		}
	}
	if _, err := hook.CompileMatcher("a[b"); err == nil {
		t.Error("bad regexp accepted")
	}
}
