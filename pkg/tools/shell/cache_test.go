package shell_test

import (
	"bytes"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/tool"
)

// TestLongOutputLeavesThePageCache checks that the saved output of a long
// command does not stay in the page cache: once the call is over, none of
// the file's pages are cached, and the file still holds every byte. A
// short saved output stays cached, for the Read that may follow.
func TestLongOutputLeavesThePageCache(t *testing.T) {
	s := newSession(t, tool.Limits{})
	s.env.OutputDir = diskDir(t)

	const size = 48 << 20
	res := s.bash(t, "head -c 50331648 /dev/zero | tr '\\0' x")
	if res.IsError || res.Truncation == nil {
		t.Fatalf("result %q: want a saved output", res.TextContent())
	}
	path := res.Truncation.FullOutputPath
	deadline := time.Now().Add(30 * time.Second)
	cached, pages := cachedPages(t, path)
	for cached > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		cached, pages = cachedPages(t, path)
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
	if cached, pages := cachedPages(t, res.Truncation.FullOutputPath); cached < pages {
		t.Errorf("%d of a short saved output's %d pages cached, want all", cached, pages)
	}
}

// diskDir returns a new directory on a file system with a page cache and
// a disk under it: the test's temporary directory unless that is in
// memory (tmpfs), else one beside the test's sources.
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC && st.Type != unix.RAMFS_MAGIC {
		return dir
	}
	dir, err := os.MkdirTemp(".", "outputs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cachedPages returns how many of path's pages are in the page cache, and
// how many pages it has.
func cachedPages(t *testing.T, path string) (cached, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		return 0, 0
	}
	// Mapping the file reads none of it; mincore reports which pages the
	// cache holds without touching them.
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		cached += int(v & 1)
	}
	return cached, len(vec)
}
