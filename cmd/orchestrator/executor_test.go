package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// The file a shortened Bash result points at, and a background shell's
// output file, outlast `orchestrator -p`: they live beside the transcript,
// in <sessions-dir>/<id>/, so the model reads them after --resume.
func TestHeadlessSavedOutputsOutlastTheRun(t *testing.T) {
	root := sandboxtest.Dir(t)
	sessions := t.TempDir()
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_big", "Bash", map[string]any{"command": "seq 1 20000"}),
			fakeapi.ToolUse("toolu_bg", "Bash", map[string]any{"command": "echo from the background", "run_in_background": true}),
		),
	)
	// The turn ends only once the background task has written its line:
	// the task may not outlive the run (it is killed when -p exits), but
	// what it wrote must.
	fake.PushFunc(func(r *fakeapi.Request) fakeapi.Reply {
		var path string
		for _, m := range r.Body.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" && b.ToolUseID == "toolu_bg" {
					if m := regexp.MustCompile(`Output is being written to: (\S+)\.`).FindStringSubmatch(b.Content[0].Text); m != nil {
						path = m[1]
					}
				}
			}
		}
		return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_wait", "Bash", map[string]any{
			"command": fmt.Sprintf("until [ -s %q ]; do sleep 0.05; done", path), "timeout": 60000}))
	})
	// However many requests the background task's notice takes.
	fake.SetFallback(func(*fakeapi.Request) fakeapi.Reply { return fakeapi.EndTurn(fakeapi.Text("Done.")) })
	r := runCLI(t, fake, "-p", "count", "--root", root, "--sessions-dir", sessions,
		"--output-format", "json", "--permission-mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var res resultJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	results := map[string]string{}
	for _, m := range fake.Requests()[1].Body.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				results[b.ToolUseID] = b.Content[0].Text
			}
		}
	}
	full := regexp.MustCompile(`Full output saved to: (\S+)`).FindStringSubmatch(results["toolu_big"])
	bg := regexp.MustCompile(`Output is being written to: (\S+)\.`).FindStringSubmatch(results["toolu_bg"])
	if full == nil || bg == nil {
		t.Fatalf("results: %q", results)
	}
	dir := filepath.Join(sessions, res.SessionID)
	for _, p := range []string{full[1], bg[1]} {
		if filepath.Dir(p) != dir {
			t.Errorf("%s is not beside the transcript, in %s", p, dir)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after orchestrator -p exited: %v", err)
		}
	}

	n := len(fake.Requests())
	fake.Push(
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": full[1], "offset": 19999}),
			fakeapi.ToolUse("toolu_cat", "Bash", map[string]any{"command": "cat " + bg[1]}),
		),
		fakeapi.EndTurn(fakeapi.Text("Read them.")),
	)
	r = runCLI(t, fake, "-p", "read them again", "--resume", res.SessionID, "--root", root, "--sessions-dir", sessions,
		"--permission-mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	msgs := fake.Requests()[n+1].Body.Messages
	got := map[string]string{}
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == "tool_result" {
			if b.IsError != nil && *b.IsError {
				t.Errorf("%s failed: %q", b.ToolUseID, b.Content[0].Text)
			}
			got[b.ToolUseID] = b.Content[0].Text
		}
	}
	if got["toolu_read"] != "19999\t19999\n20000\t20000\n20001\t" || got["toolu_cat"] != "from the background" {
		t.Fatalf("after --resume: %q", got)
	}
}
