package search

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/tool/tooltest"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/tool"
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

// The helpers shared by the tool packages' tests.
var (
	newEnv    = tooltest.NewEnv
	call      = tooltest.Call
	jsonInput = tooltest.JSONInput
)
