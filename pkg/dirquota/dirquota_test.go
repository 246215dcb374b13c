package dirquota_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolwire/toolwire/pkg/dirquota"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// TestQuotaStopsWrites makes a directory with a quota on a btrfs file
// system the test mounts and writes past it as root: the write fails with
// EDQUOT at the limit, Usage shows the directory full, and the file system
// lost no more than the quota.
func TestQuotaStopsWrites(t *testing.T) {
	fs := sandboxtest.Btrfs(t, 512<<20, true)
	q, err := dirquota.Probe(fs)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 16 << 20
	dir := filepath.Join(fs, "ws")
	if err := q.Make(dir, limit); err != nil {
		t.Fatal(err)
	}
	if err := q.Make(dir, limit); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second Make: %v, want an error that is os.ErrExist", err)
	}
	free := sandboxtest.FreeBytes(t, fs)
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var written int64
	for written < 4*limit {
		n, err := f.Write(chunk)
		written += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.EDQUOT) {
				t.Fatalf("write at %d bytes: %v, want EDQUOT", written, err)
			}
			break
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.EDQUOT) {
		t.Fatal(err)
	}
	if written >= 4*limit || written < limit/2 {
		t.Fatalf("wrote %d bytes into a quota of %d", written, limit)
	}
	syscall.Sync()
	used, got, ok, err := q.Usage(dir)
	if err != nil || !ok {
		t.Fatalf("Usage: %d, %d, %v, %v", used, got, ok, err)
	}
	if got != limit || used < limit-(1<<20) || used > limit {
		t.Fatalf("Usage = %d of %d, want about %d of %d", used, got, limit, limit)
	}
	if lost := free - sandboxtest.FreeBytes(t, fs); lost > limit+(4<<20) {
		t.Fatalf("the file system lost %d bytes for a quota of %d", lost, limit)
	}
	// A larger limit lets the same directory grow again.
	if ok, err := q.SetLimit(dir, 2*limit); !ok || err != nil {
		t.Fatalf("SetLimit: %v, %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "more"), chunk, 0o644); err != nil {
		t.Fatalf("write after raising the limit: %v", err)
	}
}

// TestOthersDirectoriesHaveNoQuota checks that SetLimit and Usage leave
// alone a directory that Make did not make: an ordinary one, and a
// subvolume someone else made (the owner's, whose limits are the owner's).
func TestOthersDirectoriesHaveNoQuota(t *testing.T) {
	fs := sandboxtest.Btrfs(t, 256<<20, true)
	q, err := dirquota.Probe(fs)
	if err != nil {
		t.Fatal(err)
	}
	plain, sub := filepath.Join(fs, "plain"), filepath.Join(fs, "sub")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("btrfs", "subvolume", "create", sub).CombinedOutput(); err != nil {
		t.Fatalf("btrfs subvolume create: %v\n%s", err, out)
	}
	for _, dir := range []string{plain, sub} {
		if ok, err := q.SetLimit(dir, 1<<20); ok || err != nil {
			t.Errorf("SetLimit(%s): %v, %v", dir, ok, err)
		}
		if _, _, ok, err := q.Usage(dir); ok || err != nil {
			t.Errorf("Usage(%s): %v, %v", dir, ok, err)
		}
	}
	// The owner's subvolume has no limit: a write bigger than the one
	// refused goes through.
	if err := os.WriteFile(filepath.Join(sub, "f"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("write into the owner's subvolume: %v", err)
	}
}

// TestProbeSaysWhy checks that Probe refuses file systems without quotas
// and says what would give them.
func TestProbeSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"btrfs without quotas", func(t *testing.T) string { return sandboxtest.Btrfs(t, 256<<20, false) }, "btrfs quota enable"},
		{"not btrfs", func(t *testing.T) string {
			d := t.TempDir()
			if err := syscall.Mount("toolwire-test", d, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Unmount(d, syscall.MNT_DETACH) })
			return d
		}, "is not on btrfs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dir(t)
			_, err := dirquota.Probe(d)
			if !errors.Is(err, dirquota.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Probe(%s) = %v, want ErrUnsupported saying %q", d, err, tc.want)
			}
		})
	}
}

// TestMakeBelowAnotherFileSystem checks that Make under a mount of another
// file system below the probed one reports ErrUnsupported and makes
// nothing.
func TestMakeBelowAnotherFileSystem(t *testing.T) {
	fs := sandboxtest.Btrfs(t, 256<<20, true)
	q, err := dirquota.Probe(fs)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(fs, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("toolwire-test", other, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(other, syscall.MNT_DETACH) })
	dir := filepath.Join(other, "ws")
	if err := q.Make(dir, 1<<20); !errors.Is(err, dirquota.ErrUnsupported) {
		t.Fatalf("Make below a tmpfs: %v, want ErrUnsupported", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Make left %s behind: %v", dir, err)
	}
}
