package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// A tool hidden from the model with --tools is not run when the model calls
// it anyway: the executor refuses it, even in bypassPermissions mode.
func TestHeadlessToolNotOfferedIsNotRun(t *testing.T) {
	root := sandboxtest.Dir(t)
	target := filepath.Join(root, "made.txt")
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_w", "Write", map[string]any{"file_path": target, "content": "x"})),
		fakeapi.EndTurn(fakeapi.Text("I could not write it.")),
	)
	r := runCLI(t, fake, "-p", "make a file", "--tools", "Read", "--root", root,
		"--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var offered []string
	for _, tl := range reqs[0].Body.Tools {
		offered = append(offered, tl.Name)
	}
	if len(offered) != 1 || offered[0] != "Read" {
		t.Fatalf("tools offered: %v, want [Read]", offered)
	}
	msgs := reqs[1].Body.Messages
	res := msgs[len(msgs)-1].Content[0]
	const want = "<tool_use_error>Error: No such tool available: Write. Write exists but is not enabled in this context. Use one of the available tools instead.</tool_use_error>"
	if res.ToolUseID != "toolu_w" || res.IsError == nil || !*res.IsError || len(res.Content) != 1 || res.Content[0].Text != want {
		t.Fatalf("result sent to the model: %+v", res)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("Write ran although --tools offered only Read")
	}
}
