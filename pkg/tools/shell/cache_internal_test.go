package shell

import (
	"bytes"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/tool"
)

// TestCaptureLetsGoOfSentOutputAsItGrows checks the release while a
// command still writes: the pages of output that progress has sent and
// that lie more than the kept stretch behind the end leave the cache, and
// output progress has not sent stays. The test waits for each stretch to
// reach the disk before the next write, so that every page the release
// covers can go; the release itself never waits.
func TestCaptureLetsGoOfSentOutputAsItGrows(t *testing.T) {
	dir := diskDir(t)
	c := newCapture(tool.DefaultMaxOutputMemory, 100<<10, func() (*os.File, error) { return os.CreateTemp(dir, "out") })
	const (
		total   = 32 << 20
		lagFrom = 20 << 20 // progress takes nothing from here on
	)
	chunk := bytes.Repeat([]byte("z"), readChunk)
	for n := 0; n < total; n += len(chunk) {
		for n <= lagFrom {
			if out, _, _, _ := c.next(progressChunk); len(out) == 0 {
				break
			}
		}
		if c.file != nil {
			if err := unix.Fdatasync(int(c.file.Fd())); err != nil {
				t.Fatal(err)
			}
		}
		c.write(chunk)
	}
	if c.file == nil {
		t.Fatal("no output file after 32 MiB")
	}
	path := c.file.Name()
	resident := residentPages(t, path)
	page := os.Getpagesize()
	// A release covers at least cacheStep, so it may stop one step short
	// of what progress has sent.
	gone, kept := (lagFrom-cacheStep)/page, lagFrom/page
	if n := count(resident[:gone]); n > 0 {
		t.Errorf("%d pages of the first %d MiB, sent long ago, still cached", n, gone*page>>20)
	}
	if n := count(resident[kept:]); n != len(resident)-kept {
		t.Errorf("%d of the %d pages progress has not sent cached, want all", n, len(resident)-kept)
	}

	// Progress gets the rest, read back from the file.
	var rest []byte
	for {
		out, dropped, _, _ := c.next(progressChunk)
		if dropped > 0 {
			t.Fatalf("%d bytes dropped", dropped)
		}
		if len(out) == 0 {
			break
		}
		rest = append(rest, out...)
	}
	if len(rest) != total-lagFrom || bytes.Count(rest, []byte("z")) != len(rest) {
		t.Errorf("progress read back %d bytes, want %d bytes of z", len(rest), total-lagFrom)
	}

	// Once the file is done with, the rest of its pages go too.
	c.closeFile()
	deadline := time.Now().Add(30 * time.Second)
	for count(residentPages(t, path)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(residentPages(t, path)); n > 0 {
		t.Errorf("%d pages still cached 30 s after the file was closed", n)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != total || bytes.Count(full, []byte("z")) != total {
		t.Errorf("the file holds %d bytes, want %d bytes of z", len(full), total)
	}
}

// count returns how many of the pages are cached.
func count(resident []bool) int {
	n := 0
	for _, r := range resident {
		if r {
			n++
		}
	}
	return n
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

// residentPages reports, page by page, which of path's pages are in the
// page cache.
func residentPages(t *testing.T, path string) []bool {
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
		return nil
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
	resident := make([]bool, len(vec))
	for i, v := range vec {
		resident[i] = v&1 != 0
	}
	return resident
}

// For the package's external tests.
var (
	DiskDir       = diskDir
	ResidentPages = residentPages
)
