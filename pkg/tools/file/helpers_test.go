package file

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/tool/tooltest"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func wrapped(s string) string { return tool.WrapUseError(s) }

// The helpers shared by the tool packages' tests.
var (
	newEnv    = tooltest.NewEnv
	call      = tooltest.Call
	jsonInput = tooltest.JSONInput
)
