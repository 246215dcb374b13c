package dirquota_test

import (
	"bytes"
	"errors"
	"os"
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

// TestOrdinaryDirectoryHasNoQuota checks that SetLimit and Usage leave a
// directory that Make did not make alone.
func TestOrdinaryDirectoryHasNoQuota(t *testing.T) {
	fs := sandboxtest.Btrfs(t, 256<<20, true)
	q, err := dirquota.Probe(fs)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(fs, "plain")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, err := q.SetLimit(dir, 1<<20); ok || err != nil {
		t.Fatalf("SetLimit on an ordinary directory: %v, %v", ok, err)
	}
	if _, _, ok, err := q.Usage(dir); ok || err != nil {
		t.Fatalf("Usage of an ordinary directory: %v, %v", ok, err)
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
