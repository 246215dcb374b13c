package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// TestMain checks for leaked goroutines and for ripgrep processes left
// running after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if kids := children(); len(kids) > 0 {
			fmt.Fprintf(os.Stderr, "child processes left running: %v\n", kids)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// children lists the live child processes of this process, from
// /proc/self/task/*/children.
func children() []string {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var kids []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err == nil {
			kids = append(kids, strings.Fields(string(b))...)
		}
	}
	return kids
}

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

func jsonInput(t testing.TB, kv map[string]any) string {
	t.Helper()
	b, err := json.Marshal(kv)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// file is one file of a test tree; age orders modification times: the
// larger, the older.
type file struct {
	name, content string
	age           int
}

// makeTree writes files under dir with modification times one minute
// apart, so that "newest first" is well defined.
func makeTree(t testing.TB, dir string, files []file) {
	t.Helper()
	base := time.Now().Add(-time.Hour)
	for _, f := range files {
		name := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(-time.Duration(f.age) * time.Minute)
		if err := os.Chtimes(name, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// standardTree is the tree of the reference transcripts: a.txt is the
// oldest, sub/d.txt the newest.
func standardTree(t testing.TB, dir string) {
	makeTree(t, dir, []file{
		{"a.txt", "alpha line 1\nneedle in a\nalpha line 3\n", 3},
		{"b.txt", "b needle\nx\ny\nz\nneedle again\n", 2},
		{"sub/d.txt", "delta needle needle\n", 1},
	})
}
