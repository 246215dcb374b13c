package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// A background launch is a Bash result like any other: it says is_error
// false, as Claude Code's do.
func TestCallBackgroundLaunchStatesIsError(t *testing.T) {
	in := `{"type":"tool_use","id":"bg","name":"Bash","input":{"command":"echo begun","run_in_background":true}}`
	rs := runCall(t, in, "--embedded", "--root", sandboxtest.Dir(t), "--output-dir", t.TempDir())
	content, _ := rs[0].Content.(string)
	if len(rs) != 1 || !strings.HasPrefix(content, "Command running in background with ID: ") {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].IsError == nil || *rs[0].IsError {
		t.Fatalf("is_error %v, want false stated", deref(rs[0].IsError))
	}
}

// --tools holds the session to the tools it names: a call of any other tool
// is refused by the executor and runs nothing.
func TestCallTools(t *testing.T) {
	root := sandboxtest.Dir(t)
	in := `[{"type":"tool_use","id":"w","name":"Write","input":{"file_path":"f.txt","content":"x"}},
	        {"type":"tool_use","id":"g","name":"Glob","input":{"pattern":"*.txt"}}]`
	rs := runCall(t, in, "--embedded", "--root", root, "--tools", "Read,Glob")
	want := "<tool_use_error>Error: No such tool available: Write. Write exists but is not enabled in this context. Use one of the available tools instead.</tool_use_error>"
	if len(rs) != 2 || rs[0].Content != want || rs[0].IsError == nil || !*rs[0].IsError {
		t.Fatalf("results %+v", rs)
	}
	if rs[1].Content != "No files found" || rs[1].IsError != nil {
		t.Fatalf("Glob, which --tools names: %+v", rs[1])
	}
	if _, err := os.Stat(filepath.Join(root, "f.txt")); err == nil {
		t.Fatal("Write ran although --tools did not name it")
	}

	cmd := exec.Command(toolsvcBin, "call", "--embedded", "--root", root, "--tools", "Read,Raed")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"Raed"`) {
		t.Fatalf("--tools with an unknown name: %v\n%s", err, out)
	}
}

// TestCallUnsendable: a call the stream cannot carry (larger than a gRPC
// message may be, or input that is not UTF-8) gets an is_error result of
// its own; the stream and the other calls go on.
func TestCallUnsendable(t *testing.T) {
	root := sandboxtest.Dir(t)
	big := strings.Repeat("x", 17<<20)
	in := `{"type":"tool_use","id":"big","name":"Write","input":{"file_path":"big.txt","content":"` + big + `"}}
{"type":"tool_use","id":"bin","name":"Bash","input":{"command":"echo ` + "\xff\xfe" + ` > bin.txt"}}
{"type":"tool_use","id":"ok","name":"Bash","input":{"command":"echo fine"}}
`
	rs := runCall(t, in, "--embedded", "--root", root)
	byID := map[string]toolResult{}
	for _, r := range rs {
		byID[r.ToolUseID] = r
	}
	if len(rs) != 3 {
		t.Fatalf("results %+v", rs)
	}
	want := map[string]string{
		"big": "<tool_use_error>InputValidationError: Write was called with input too large to send to the executor: the message would be 17825861 bytes, and one may carry at most 16777216, so the call was not run.",
		"bin": "<tool_use_error>InputValidationError: Bash was called with input that is not valid UTF-8 (byte 0xff at offset 17).",
		"ok":  "fine",
	}
	for id, prefix := range want {
		r := byID[id]
		content, _ := r.Content.(string)
		if !strings.HasPrefix(content, prefix) {
			t.Errorf("%s: %q, want it to start %q", id, content, prefix)
		}
		if r.IsError == nil || *r.IsError != (id != "ok") {
			t.Errorf("%s: is_error %v", id, deref(r.IsError))
		}
	}
	for _, f := range []string{"big.txt", "bin.txt"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s was written", f)
		}
	}
}
