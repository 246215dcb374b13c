package shell_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/tools/shell"
)

// TestLongOutputLeavesThePageCache checks that the saved output of a long
// command does not stay in the page cache: once the call is over, none of
// the file's pages are cached, and the file still holds every byte. A
// short saved output stays cached, for the Read that may follow.
func TestLongOutputLeavesThePageCache(t *testing.T) {
	s := newSession(t, tool.Limits{})
	s.env.OutputDir = shell.DiskDir(t)

	const size = 48 << 20
	res := s.bash(t, "head -c 50331648 /dev/zero | tr '\\0' x")
	if res.IsError || res.Truncation == nil {
		t.Fatalf("result %q: want a saved output", res.TextContent())
	}
	path := res.Truncation.FullOutputPath
	deadline := time.Now().Add(30 * time.Second)
	cached, pages := resident(t, path)
	for cached > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		cached, pages = resident(t, path)
	}
	if cached > 0 {
		t.Errorf("%d of the saved output's %d pages still cached 30 s after the call", cached, pages)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != size || !bytes.Equal(full, bytes.Repeat([]byte("x"), size)) {
		t.Errorf("saved output of %d bytes, want %d bytes of x", len(full), size)
	}

	res = s.bash(t, "head -c 1048576 /dev/zero | tr '\\0' y")
	if res.Truncation == nil {
		t.Fatalf("result %q: want a saved output", res.TextContent())
	}
	// Nothing evicts pages here unless memory runs short, which a test
	// machine's does not.
	if cached, pages := resident(t, res.Truncation.FullOutputPath); cached < pages {
		t.Errorf("%d of a short saved output's %d pages cached, want all", cached, pages)
	}
}

// resident returns how many of path's pages are in the page cache, and how
// many pages it has.
func resident(t *testing.T, path string) (cached, pages int) {
	for _, r := range shell.ResidentPages(t, path) {
		if r {
			cached++
		}
		pages++
	}
	return cached, pages
}
