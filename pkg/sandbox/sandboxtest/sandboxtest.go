// Package sandboxtest has helpers for tests that start sandboxed processes:
// directories a sandbox user can use, and checks that no process, zombie or
// file descriptor outlives a test.
package sandboxtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/sandbox"
)

// NobodyUID and NobodyGID are the ids of "nobody" on Debian.
const (
	NobodyUID = 65534
	NobodyGID = 65534
)

// Dir returns a new temporary directory that the sandbox's default user can
// reach and write: when the test runs as root, the directory is given to
// nobody, and it and its parent are made searchable by others, so that a
// session user (sandbox.Config.SessionUser) reaches a directory created in
// it for the session, or gets it as a workspace shown as its own.
func Dir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if os.Geteuid() == 0 {
		for _, p := range []string{filepath.Dir(d), d} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(d, NobodyUID, NobodyGID); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// Descendants lists the processes below this one, zombies included, as
// "pid state command" strings.
func Descendants() []string {
	self := os.Getpid()
	parent := map[int]int{}
	info := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(string(b[close+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		info[pid] = fmt.Sprintf("%d %s %s", pid, f[0], b[open+1:close])
	}
	var out []string
	for pid := range parent {
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == self {
				out = append(out, info[pid])
				break
			}
		}
	}
	return out
}

// OpenFDs counts this process's open file descriptors.
func OpenFDs() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// WaitNoDescendants waits up to timeout for every descendant process to be
// gone and returns the ones that are left.
func WaitNoDescendants(timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		left := Descendants()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LeakOptions are the goleak options for packages that use the sandbox:
// the orphan reaper started by sandbox.BecomeSubreaper lives as long as the
// process.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/toolwire/toolwire/pkg/sandbox.reapLoop"),
		goleak.IgnoreAnyFunction("os/signal.signal_recv"),
		goleak.IgnoreAnyFunction("os/signal.loop"),
	}
}

// Main runs m and then fails the run if goroutines leaked or descendant
// processes remain. Call it from TestMain after sandbox.BecomeSubreaper.
func Main(m *testing.M) int {
	code := m.Run()
	// The tests' runners are closed: their cgroup group goes, as it does
	// when toolsvc stops.
	sandbox.ReleaseSessionGroups()
	if code != 0 {
		return code
	}
	if left := WaitNoDescendants(5 * time.Second); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "sandboxtest: processes left after the tests: %v\n", left)
		return 1
	}
	if err := goleak.Find(LeakOptions()...); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxtest: %v\n", err)
		return 1
	}
	return 0
}

// Btrfs mounts a btrfs file system of size bytes made for the test, on a
// loop device over an image in a temporary directory, with quotas enabled
// when quotas is set, and returns its mount point. The test fails when it
// cannot (mkfs.btrfs and btrfs come with Debian's btrfs-progs, which
// scripts/test installs); it is skipped without root. The file system is
// unmounted and its image removed when the test ends.
func Btrfs(t testing.TB, size int64, quotas bool) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a file system needs root")
	}
	image := filepath.Join(t.TempDir(), "btrfs.img")
	if err := os.WriteFile(image, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(image, size); err != nil {
		t.Fatal(err)
	}
	dir := Dir(t)
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("mkfs.btrfs", "-q", "-f", image)
	// mount(8) sets the loop device up, and frees it at the unmount.
	run("mount", "-o", "loop", image, dir)
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if quotas {
		run("btrfs", "quota", "enable", dir)
	}
	return dir
}

// FreeBytes returns the bytes free for unprivileged users on the file
// system of dir.
func FreeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
