package execgrpc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

func (s *stream) background(id string) {
	s.t.Helper()
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Background{Background: &executorv1.Background{ToolUseId: id}}})
}

// movedResult waits for the BackgroundAck and the Result of call id, and
// returns the background task's id and output file.
func (s *stream) movedResult(id string) (taskID, outPath string) {
	s.t.Helper()
	var ack *executorv1.BackgroundAck
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool {
		if a := ev.GetBackgroundAck(); a != nil {
			ack = a
		}
		return ev.GetResult().GetToolUseId() == id
	})
	r := evs[len(evs)-1].GetResult()
	if ack == nil || !ack.GetMoved() || ack.GetToolUseId() != id {
		s.t.Fatalf("ack %v before the result", ack)
	}
	m := regexp.MustCompile(`^Command running in background with ID: (b[a-z0-9]{8})\. Output is being written to: (\S+)\. You will be notified when it completes\. To check interim output, use Read on that file path\.$`).FindStringSubmatch(text(r))
	if m == nil || r.IsError == nil || r.GetIsError() {
		s.t.Fatalf("result of the moved call: %q (is_error %v)", text(r), r.IsError)
	}
	return m[1], m[2]
}

// lastTick is the highest "tick N" in out.
func lastTick(out string) int {
	n := 0
	for _, m := range regexp.MustCompile(`tick (\d+)\n`).FindAllStringSubmatch(out, -1) {
		n, _ = strconv.Atoi(m[1])
	}
	return n
}

// A sleep-and-print loop moved to the background mid-run keeps running
// (its output file grows, from the first line it printed in the
// foreground on), TaskOutput sees it running, and TaskStop ends it with
// every process of its tree.
func TestBackgroundARunningCall(t *testing.T) {
	h, _ := realHarness(t)
	s := h.open(nil)
	s.use("loop", "m1", `{"command":"for i in $(seq 1 100000); do echo tick $i; sleep 0.05; done","description":"ticker"}`)
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		return strings.Contains(string(ev.GetProgress().GetOutput()), "tick 3\n")
	})
	s.background("loop")
	id, outPath := s.movedResult("loop")

	read := func() string {
		b, err := os.ReadFile(outPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := read()
	if !strings.HasPrefix(first, "tick 1\ntick 2\ntick 3\n") {
		t.Fatalf("the output file does not start with the foreground's output: %q", first)
	}
	// The command goes on: the file grows past what it held at the move.
	for deadline := time.Now().Add(20 * time.Second); lastTick(read()) < lastTick(first)+5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the output stopped growing at %q", read())
		}
	}
	// The model reads it as Claude Code says: Read on the output file.
	s.useTool("read", "m2", "Read", `{"file_path":"`+outPath+`"}`)
	if got := text(s.results(1)[0]); !strings.Contains(got, "tick 1\n") || !strings.Contains(got, "tick "+strconv.Itoa(lastTick(first)+5)) {
		t.Fatalf("Read of the output file: %q", got)
	}
	s.useTool("out", "m3", "TaskOutput", `{"task_id":"`+id+`","block":false}`)
	if got := text(s.results(1)[0]); got != "<retrieval_status>not_ready</retrieval_status>\n\n<task_id>"+id+"</task_id>\n\n<task_type>local_bash</task_type>\n\n<status>running</status>" {
		t.Fatalf("TaskOutput: %q", got)
	}
	s.useTool("stop", "m4", "TaskStop", `{"task_id":"`+id+`"}`)
	if got := text(s.results(1)[0]); !strings.HasPrefix(got, `{"message":"Successfully stopped task: `+id+` (for i in`) {
		t.Fatalf("TaskStop: %q", got)
	}
	for deadline := time.Now().Add(20 * time.Second); len(sandboxtest.Descendants()) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes left after TaskStop: %v", sandboxtest.Descendants())
		}
	}
	stopped := read()
	s.useTool("gone", "m5", "TaskOutput", `{"task_id":"`+id+`"}`)
	if r := s.results(1)[0]; text(r) != "<tool_use_error>No task found with ID: "+id+"</tool_use_error>" {
		t.Fatalf("TaskOutput after the stop: %q", text(r))
	}
	if read() != stopped {
		t.Fatal("the output grew after TaskStop")
	}
}

// A moved command that ends by itself is announced with a
// TaskNotification, and TaskOutput gives its whole output, from before and
// after the move.
func TestBackgroundedCallIsAnnounced(t *testing.T) {
	h, root := realHarness(t)
	s := h.open(nil)
	s.use("wait", "m1", `{"command":"echo before; while [ ! -e go ]; do sleep 0.05; done; echo after; exit 3","description":"waiter"}`)
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		return strings.Contains(string(ev.GetProgress().GetOutput()), "before")
	})
	s.background("wait")
	id, outPath := s.movedResult("wait")
	if err := os.WriteFile(filepath.Join(root, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetTaskNotification() != nil })
	n := evs[len(evs)-1].GetTaskNotification()
	if n.GetTaskId() != id || n.GetToolUseId() != "wait" || n.GetStatus() != "failed" || n.GetExitCode() != 3 ||
		n.GetOutputPath() != outPath || n.GetSummary() != `Background command "waiter" failed with exit code 3` {
		t.Fatalf("notification %v", n)
	}
	s.useTool("out", "m2", "TaskOutput", `{"task_id":"`+id+`"}`)
	want := "<retrieval_status>success</retrieval_status>\n\n<task_id>" + id + "</task_id>\n\n<task_type>local_bash</task_type>\n\n<status>failed</status>\n\n<exit_code>3</exit_code>\n\n<output>\nbefore\nafter\n</output>"
	if got := text(s.results(1)[0]); got != want {
		t.Fatalf("TaskOutput: %q\nwant       %q", got, want)
	}
}

// A Background the executor cannot honour is answered, and changes
// nothing.
func TestBackgroundRefused(t *testing.T) {
	h, _ := realHarness(t)
	s := h.open(nil)
	s.use("done", "m1", `{"command":"echo hi"}`)
	s.results(1)
	for id, reason := range map[string]string{
		"nope": "no call with that tool_use id in this session",
		"done": "the call has finished",
	} {
		s.background(id)
		evs := s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetBackgroundAck() != nil })
		if a := evs[len(evs)-1].GetBackgroundAck(); a.GetToolUseId() != id || a.GetMoved() || a.GetReason() != reason {
			t.Errorf("ack %v, want %q", a, reason)
		}
	}
}
