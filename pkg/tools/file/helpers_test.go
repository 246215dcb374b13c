package file

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newEnv returns a session whose working directory is a fresh temporary
// directory, and that directory.
func newEnv(t testing.TB, extra ...func(*workspace.Config)) (*tool.Env, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := workspace.Config{Dir: dir}
	for _, f := range extra {
		f(&cfg)
	}
	ws, err := workspace.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &tool.Env{Files: ws, Reads: tool.NewFileState(), Limits: tool.Limits{}.WithDefaults()}, dir
}

// call runs a tool the way the executor does: Validate, whose errors
// become <tool_use_error> results, then Run.
func call(t testing.TB, tl tool.Tool, env *tool.Env, input string) *tool.Result {
	t.Helper()
	in := json.RawMessage(input)
	ctx := context.Background()
	if err := tl.Validate(ctx, env, in); err != nil {
		var ie *tool.InputError
		var de *tool.DeniedError
		switch {
		case errors.As(err, &ie):
			return tool.UseError(tool.OutcomeInvalidInput, ie.Msg)
		case errors.As(err, &de):
			return tool.UseError(tool.OutcomeSandboxDenied, de.Msg)
		default:
			t.Fatalf("Validate returned %T %v; want *tool.InputError or *tool.DeniedError", err, err)
		}
	}
	return tl.Run(ctx, env, &tool.Call{ID: "toolu_test", Name: tl.Spec().Name, Input: in, Progress: func(tool.Progress) {}})
}

// want is the expected text and error flag of a result.
type want struct {
	text    string
	isError bool
	outcome tool.Outcome // checked when set
}

func check(t testing.TB, r *tool.Result, w want) {
	t.Helper()
	if got := r.TextContent(); got != w.text {
		t.Errorf("text:\n got %q\nwant %q", got, w.text)
	}
	if r.IsError != w.isError {
		t.Errorf("IsError = %v, want %v", r.IsError, w.isError)
	}
	if w.outcome != 0 && r.FinalOutcome() != w.outcome {
		t.Errorf("outcome = %v, want %v", r.FinalOutcome(), w.outcome)
	}
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bumpMtime moves a file's modification time forward without changing
// its content, as touch does.
func bumpMtime(t testing.TB, name string) {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	later := fi.ModTime().Add(2 * time.Second)
	if err := os.Chtimes(name, later, later); err != nil {
		t.Fatal(err)
	}
}

// jsonInput builds a tool input from key/value pairs.
func jsonInput(t testing.TB, kv map[string]any) string {
	t.Helper()
	b, err := json.Marshal(kv)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wrapped(s string) string { return tool.WrapUseError(s) }
