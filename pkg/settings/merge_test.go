package settings

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/permission"
)

func TestMergeLayers(t *testing.T) {
	user := Source{Name: "user", Data: []byte(`{
  "permissions": {"allow": ["Read", "Bash(git log:*)"], "deny": ["Read(./.env)"], "defaultMode": "plan"},
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "user.sh"}]}]}
}`)}
	project := Source{Name: "project", Data: []byte(`{
  "permissions": {"allow": ["Read", "Edit"], "ask": ["Bash(git push:*)"]},
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "project.sh"}]}]}
}`)}
	local := Source{Name: "local", Data: []byte(`{"permissions": {"defaultMode": "acceptEdits", "deny": ["Bash(rm:*)"]}}`)}
	flag := Source{Name: "--settings", Data: []byte(`{"permissions": {"disableBypassPermissionsMode": "disable"}}`)}

	s, err := Merge(user, project, local, flag)
	if err != nil {
		t.Fatal(err)
	}
	want := Permissions{
		Allow:         []string{"Read", "Bash(git log:*)", "Edit"}, // "Read" once
		Ask:           []string{"Bash(git push:*)"},
		Deny:          []string{"Read(./.env)", "Bash(rm:*)"},
		DefaultMode:   permission.Mode("acceptEdits"), // the later layer's scalar wins
		DisableBypass: true,
	}
	if !reflect.DeepEqual(s.Permissions, want) {
		t.Fatalf("permissions = %+v\nwant %+v", s.Permissions, want)
	}
	pre := s.Hooks[PreToolUse]
	if len(pre) != 2 || pre[0].Hooks[0].Command != "user.sh" || pre[1].Hooks[0].Command != "project.sh" {
		t.Fatalf("PreToolUse hooks = %+v, want the user's then the project's", pre)
	}

	// A scalar of a lower layer stays when the higher one does not set it.
	s, err = Merge(user, Source{Name: "x", Data: []byte(`{"permissions": {"allow": ["Glob"]}}`)})
	if err != nil || s.Permissions.DefaultMode != "plan" {
		t.Fatalf("mode = %q, %v", s.Permissions.DefaultMode, err)
	}
	if s, err := Merge(); err != nil || !reflect.DeepEqual(s, Settings{}) {
		t.Fatalf("no sources: %+v, %v", s, err)
	}
}

func TestMergeNamesTheBadSource(t *testing.T) {
	good := Source{Name: "good.json", Data: []byte(`{"permissions": {"allow": ["Read"]}}`)}
	bad := Source{Name: "--settings", Data: []byte("{\n  \"permissions\": {\"allow\": [\"Bash(ls\"]}\n}")}
	_, err := Merge(good, bad)
	if err == nil || !strings.HasPrefix(err.Error(), "--settings:2:") || !strings.Contains(err.Error(), "Bash(ls") {
		t.Fatalf("error = %v, want one naming --settings, line 2 and the rule", err)
	}
}

func TestDiscover(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if src, err := Discover(home, project); err != nil || len(src) != 0 {
		t.Fatalf("no files: %v, %v", src, err)
	}
	write(filepath.Join(home, "settings.json"), `{"permissions": {"allow": ["Read"]}}`)
	write(filepath.Join(project, ".claude", "settings.local.json"), `{"permissions": {"allow": ["Edit"]}}`)
	write(filepath.Join(project, ".claude", "settings.json"), `{"permissions": {"allow": ["Glob"]}}`)
	src, err := Discover(home, project)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range src {
		names = append(names, s.Name)
	}
	want := []string{filepath.Join(home, "settings.json"), filepath.Join(project, ".claude", "settings.json"), filepath.Join(project, ".claude", "settings.local.json")}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("discovered %q, want %q", names, want)
	}
	s, err := Merge(src...)
	if err != nil || !reflect.DeepEqual(s.Permissions.Allow, []string{"Read", "Glob", "Edit"}) {
		t.Fatalf("merged allow = %q, %v", s.Permissions.Allow, err)
	}

	// The user's directory is ~/.claude: run in ~, the user file is not
	// read a second time as the project's.
	write(filepath.Join(home, ".claude", "settings.json"), `{"permissions": {"allow": ["Read"]}}`)
	if src, err := Discover(filepath.Join(home, ".claude"), home); err != nil || len(src) != 1 {
		t.Fatalf("home as project: %d sources, %v", len(src), err)
	}
}
