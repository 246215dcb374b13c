package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// helloConcurrency is the max concurrency the session's Hello reports
// among the --progress events.
func helloConcurrency(t *testing.T, events string) int {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(events))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Hello *struct {
				MaxConcurrency int `json:"maxConcurrency"`
			} `json:"hello"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Hello != nil {
			return ev.Hello.MaxConcurrency
		}
	}
	t.Fatalf("no hello among the events:\n%s", events)
	return 0
}

// Claude Code's variables are aliases of toolsvc's flags, under the flag
// and toolwire's own variable, over the "env" object of --settings.
func TestClaudeCodeVariables(t *testing.T) {
	root := sandboxtest.Dir(t)
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settingsFile, []byte(`{"env":{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY":"6","BASH_DEFAULT_TIMEOUT_MS":"1000"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	echo := `{"type":"tool_use","id":"e","name":"Bash","input":{"command":"echo hi"}}`
	for _, c := range []struct {
		name  string
		env   []string
		flags []string
		want  int
	}{
		{"default", nil, nil, 10},
		{"Claude Code's name", []string{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=3"}, nil, 3},
		{"ours over Claude Code's", []string{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=3", "TOOLWIRE_MAX_TOOL_CONCURRENCY=4"}, nil, 4},
		{"flag over both", []string{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=3", "TOOLWIRE_MAX_TOOL_CONCURRENCY=4"}, []string{"--max-concurrency", "5"}, 5},
		{"settings env", nil, []string{"--settings", settingsFile}, 6},
		{"environment over settings env", []string{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=3"}, []string{"--settings", settingsFile}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append([]string{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=", "TOOLWIRE_MAX_TOOL_CONCURRENCY="}, c.env...)
			_, events := toolsvcCall(t, echo, env, append([]string{"--embedded", "--root", root, "--progress"}, c.flags...)...)
			if got := helloConcurrency(t, events); got != c.want {
				t.Errorf("max concurrency %d, want %d", got, c.want)
			}
		})
	}

	sleep := func(timeout string) string {
		in := `{"command":"sleep 30"`
		if timeout != "" {
			in += `,"timeout":` + timeout
		}
		return `{"type":"tool_use","id":"s","name":"Bash","input":` + in + `}}`
	}
	for _, c := range []struct {
		name, input string
		env, flags  []string
		want        string
	}{
		{"default timeout", sleep(""), []string{"BASH_DEFAULT_TIMEOUT_MS=1000"}, nil, "Command timed out after 1s"},
		{"default timeout from settings env", sleep(""), nil, []string{"--settings", settingsFile}, "Command timed out after 1s"},
		{"largest timeout", sleep("60000"), []string{"BASH_DEFAULT_TIMEOUT_MS=1000", "BASH_MAX_TIMEOUT_MS=1500"}, nil, "Command timed out after 1s"},
		{"flag over variable", sleep("60000"), []string{"BASH_DEFAULT_TIMEOUT_MS=1000", "BASH_MAX_TIMEOUT_MS=1500"}, []string{"--max-timeout", "2s"}, "Command timed out after 2s"},
		{"largest raised to the default", sleep(""), []string{"BASH_DEFAULT_TIMEOUT_MS=2000", "BASH_MAX_TIMEOUT_MS=1000"}, nil, "Command timed out after 2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _ := toolsvcCall(t, c.input, append([]string{"BASH_DEFAULT_TIMEOUT_MS=", "BASH_MAX_TIMEOUT_MS="}, c.env...), append([]string{"--embedded", "--root", root}, c.flags...)...)
			r := results(t, out)["s"]
			if !isError(r) || text(r) != "Exit code 143\n"+c.want {
				t.Errorf("result %+v, want %q", r, c.want)
			}
		})
	}
}

// A variable that is set but is no positive whole number stops toolsvc at
// start, naming the variable.
func TestClaudeCodeVariablesInvalid(t *testing.T) {
	root := sandboxtest.Dir(t)
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settingsFile, []byte(`{"env":{"BASH_MAX_TIMEOUT_MS":"-5"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env   string
		flags []string
		want  string
	}{
		{"BASH_DEFAULT_TIMEOUT_MS=2m", nil, `BASH_DEFAULT_TIMEOUT_MS: "2m" is not a positive whole number`},
		{"BASH_MAX_TIMEOUT_MS=0", nil, `BASH_MAX_TIMEOUT_MS: "0" is not a positive whole number`},
		{"CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY=many", nil, `CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY: "many" is not a positive whole number`},
		{"TOOLWIRE_MAX_TOOL_CONCURRENCY=-1", nil, `TOOLWIRE_MAX_TOOL_CONCURRENCY: "-1" is not a positive whole number`},
		{"X=", []string{"--settings", settingsFile}, `BASH_MAX_TIMEOUT_MS (settings env): "-5" is not a positive whole number`},
	} {
		for _, sub := range []string{"call", "serve"} {
			args := append([]string{sub, "--root", root}, c.flags...)
			if sub == "call" {
				args = append(args, "--embedded")
			} else {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			cmd := exec.Command(toolsvcBin, args...)
			cmd.Env = append(os.Environ(), c.env)
			cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"e","name":"Bash","input":{"command":"echo hi"}}`)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("%s with %s: %v, output %s; want an error saying %q", sub, c.env, err, out, c.want)
			}
		}
	}
}
