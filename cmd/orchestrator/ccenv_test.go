package main_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// -p's in-process executor takes its Bash timeouts from Claude Code's
// variables, in the environment or in the settings files' "env"; an
// invalid one is a usage error naming it.
func TestHeadlessClaudeCodeVariables(t *testing.T) {
	sleep := fakeapi.ToolUse("toolu_s", "Bash", map[string]any{"command": "sleep 30"})
	for _, c := range []struct {
		name     string
		env      []string
		settings string
	}{
		{"environment", []string{"BASH_DEFAULT_TIMEOUT_MS=1000"}, ""},
		{"settings env", nil, `{"env":{"BASH_DEFAULT_TIMEOUT_MS":"1000"}}`},
		{"environment over settings env", []string{"BASH_DEFAULT_TIMEOUT_MS=1000"}, `{"env":{"BASH_DEFAULT_TIMEOUT_MS":"900000"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := sandboxtest.Dir(t)
			if c.settings != "" {
				writeFile(t, filepath.Join(root, ".claude", "settings.json"), c.settings, 0o644)
			}
			fake := fakeapi.New(t, turns(sleep)...)
			r := cli{dir: root, env: c.env}.run(t, fake, "-p", "sleep", "--root", root, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
			checkResults(t, fake, r, map[string]wantResult{"toolu_s": {contains: "Exit code 143\nCommand timed out after 1s", isError: true}})
		})
	}

	root := sandboxtest.Dir(t)
	r := cli{dir: root, env: []string{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=lots"}}.run(t, fakeapi.New(t), "-p", "hi", "--root", root, "--sessions-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, `CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY: "lots" is not a positive whole number`) {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
}
