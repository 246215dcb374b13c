// Package tooltest helps tool packages test their tools the way the
// executor runs them, on a real workspace, without the queue or gRPC.
package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// NewEnv returns a session environment whose working directory is a fresh
// temporary directory, and that directory. extra adjusts the workspace
// configuration.
func NewEnv(t testing.TB, extra ...func(*workspace.Config)) (*tool.Env, string) {
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

// Call runs a tool with a schema-valid input the way the executor does:
// Validate, whose errors become results, then Run.
func Call(t testing.TB, tl tool.Tool, env *tool.Env, input string) *tool.Result {
	t.Helper()
	in := json.RawMessage(input)
	ctx := context.Background()
	if err := tl.Validate(ctx, env, in); err != nil {
		var ie *tool.InputError
		var de *tool.DeniedError
		if !errors.As(err, &ie) && !errors.As(err, &de) {
			t.Fatalf("Validate returned %T %v; want *tool.InputError or *tool.DeniedError", err, err)
		}
		return tool.ValidationResult(err)
	}
	return tl.Run(ctx, env, &tool.Call{ID: "toolu_test", Name: tl.Spec().Name, Input: in, Progress: func(tool.Progress) {}})
}

// JSONInput encodes kv as a tool input.
func JSONInput(t testing.TB, kv map[string]any) string {
	t.Helper()
	b, err := json.Marshal(kv)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
