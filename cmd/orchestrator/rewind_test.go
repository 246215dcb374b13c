package main_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// requestShape lists the ids of the tool_use and tool_result blocks and the
// texts of a request's messages, one string per message.
func requestShape(r *fakeapi.Request) []string {
	var out []string
	for _, m := range r.Body.Messages {
		var parts []string
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				parts = append(parts, "use:"+b.ID)
			case "tool_result":
				parts = append(parts, "result:"+b.ToolUseID)
			case "text":
				parts = append(parts, "text:"+b.Text)
			}
		}
		out = append(out, string(m.Role)+"["+strings.Join(parts, ",")+"]")
	}
	return out
}

// -p --resume ID --rewind-to TOOL_USE_ID restores the files the file
// tools changed from that tool_use's message on (bytes and mode back, new
// files removed; earlier changes kept), cuts the conversation before that
// message, and the next request to the model holds the cut conversation;
// the cut is in the transcript, so a later --resume goes on from it.
func TestHeadlessRewind(t *testing.T) {
	root, sessions := sandboxtest.Dir(t), t.TempDir()
	kept, b, c := filepath.Join(root, "kept.txt"), filepath.Join(root, "b.txt"), filepath.Join(root, "c.txt")
	writeFile(t, b, "bee\n", 0o600)
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_k", "Write", map[string]any{"file_path": kept, "content": "kept\n"})),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_r", "Read", map[string]any{"file_path": b})),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_e", "Edit", map[string]any{"file_path": b, "old_string": "bee", "new_string": "BEE"})),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_c", "Write", map[string]any{"file_path": c, "content": "new\n"})),
		fakeapi.EndTurn(fakeapi.Text("Done.")),
	)
	args := []string{"--root", root, "--sessions-dir", sessions, "--permission-mode", "bypassPermissions", "--output-format", "json"}
	r := cli{dir: root}.run(t, fake, append([]string{"-p", "change the files"}, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var res resultJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.SessionID == "" {
		t.Fatalf("result %q: %v", r.stdout, err)
	}
	if got, _ := os.ReadFile(b); string(got) != "BEE\n" {
		t.Fatalf("b.txt after the first run: %q", got)
	}

	fake2 := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("Starting over.")))
	r = cli{dir: root}.run(t, fake2, append([]string{"-p", "--resume", res.SessionID, "--rewind-to", "toolu_e", "do it differently"}, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"restored " + b, "removed " + c, "rewound to before toolu_e: 5 messages removed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if fi, err := os.Stat(b); err != nil || fi.Mode()&fs.ModePerm != 0o600 {
		t.Fatalf("b.txt: %v %v", fi, err)
	}
	if got, _ := os.ReadFile(b); string(got) != "bee\n" {
		t.Fatalf("b.txt after the rewind: %q", got)
	}
	if _, err := os.Stat(c); !os.IsNotExist(err) {
		t.Fatalf("c.txt, created after the rewind point: %v", err)
	}
	if got, _ := os.ReadFile(kept); string(got) != "kept\n" {
		t.Fatalf("kept.txt, written before the rewind point: %q", got)
	}
	want := "user[text:change the files] assistant[use:toolu_k] user[result:toolu_k] assistant[use:toolu_r] user[result:toolu_r,text:do it differently]"
	if got := strings.Join(requestShape(fake2.Requests()[0]), " "); got != want {
		t.Fatalf("the next request holds\n%s\nwant\n%s", got, want)
	}

	fake3 := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("Still here.")))
	r = cli{dir: root}.run(t, fake3, append([]string{"-p", "--resume", res.SessionID, "and now?"}, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	want += " assistant[text:Starting over.] user[text:and now?]"
	if got := strings.Join(requestShape(fake3.Requests()[0]), " "); got != want {
		t.Fatalf("a later --resume sends\n%s\nwant\n%s", got, want)
	}

	// An id the conversation does not hold changes nothing.
	r = cli{dir: root}.run(t, fakeapi.New(t), append([]string{"-p", "--resume", res.SessionID, "--rewind-to", "toolu_nope"}, args...)...)
	if r.code == 0 || !strings.Contains(r.stderr, `no assistant message with tool_use "toolu_nope"`) {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	r = cli{dir: root}.run(t, fakeapi.New(t), "-p", "--rewind-to", "toolu_e", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, "--rewind-to goes back in a conversation") {
		t.Fatalf("without --resume: exit %d\n%s", r.code, r.stderr)
	}
}
