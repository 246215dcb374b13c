package execgrpc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

var (
	savedTo      = regexp.MustCompile(`Full output saved to: (\S+)`)
	bgWrittenTo  = regexp.MustCompile(`Output is being written to: (\S+)\.`)
	bypassConfig = settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}}
)

// TestSavedOutputsOutlastTheSession: with an output root, the file a
// shortened Bash result points at and a background shell's output file
// stay when the session ends, and a later session of the same id reads
// them with Read and Bash, but cannot change them.
func TestSavedOutputsOutlastTheSession(t *testing.T) {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	outputs := filepath.Join(d, "outputs")
	h, _ := permHarness(t, execsvc.Config{Operator: bypassConfig, OutputRoot: outputs})
	open := &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{SessionId: "conv-7"}}}

	s := h.start(open)
	s.useTool("big", "m1", "Bash", `{"command":"seq 1 20000"}`)
	s.useTool("bg", "m1", "Bash", `{"command":"echo from the background","run_in_background":true}`)
	rs := s.results(2)
	m := savedTo.FindStringSubmatch(text(rs[0]))
	if m == nil || rs[0].GetTruncation().GetFullOutputPath() != m[1] {
		t.Fatalf("big output: %q, truncation %v", text(rs[0]), rs[0].GetTruncation())
	}
	full := m[1]
	m = bgWrittenTo.FindStringSubmatch(text(rs[1]))
	if m == nil {
		t.Fatalf("background launch: %q", text(rs[1]))
	}
	bg := m[1]
	for _, p := range []string{full, bg} {
		if filepath.Dir(p) != filepath.Join(outputs, "conv-7") {
			t.Errorf("%s is not in the session's output directory %s", p, filepath.Join(outputs, "conv-7"))
		}
	}
	s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetTaskNotification() != nil })
	if err := s.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for range s.events {
	}
	if n := h.ex.Sessions(); n != 0 {
		t.Fatalf("%d sessions still open", n)
	}

	next := h.start(open)
	next.useTool("read", "m2", "Read", `{"file_path":"`+full+`","offset":19999}`)
	next.useTool("cat", "m2", "Bash", `{"command":"cat `+bg+`; echo more >> `+full+` || echo refused"}`)
	next.useTool("write", "m2", "Write", `{"file_path":"`+bg+`","content":"x"}`)
	rs = next.results(3)
	if r := rs[0]; r.GetIsError() || text(r) != "19999\t19999\n20000\t20000\n20001\t" {
		t.Errorf("Read of the saved output in the next session: %q", text(r))
	}
	if r := rs[1]; !strings.HasPrefix(text(r), "from the background\n") || !strings.HasSuffix(text(r), "refused") {
		t.Errorf("Bash on the saved outputs in the next session: %q", text(r))
	}
	if r := rs[2]; !r.GetIsError() {
		t.Errorf("Write over a saved output: %q", text(r))
	}
	if b, err := os.ReadFile(bg); err != nil || string(b) != "from the background\n" {
		t.Errorf("background output now %q %v", b, err)
	}
}
