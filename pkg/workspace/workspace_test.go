package workspace

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a temporary tree: base/work is the read-write root, base/ro a
// read-only root, base/outside is not allowed, and base/outside/secret
// holds text that must never be read through the workspace.
type fixture struct {
	base, work, ro, outside, secret string
	ws                              *Workspace
}

const secretText = "TOP SECRET"

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{
		base:    base,
		work:    filepath.Join(base, "work"),
		ro:      filepath.Join(base, "ro"),
		outside: filepath.Join(base, "outside"),
	}
	f.secret = filepath.Join(f.outside, "secret")
	for _, d := range []string{f.work, f.ro, f.outside, filepath.Join(f.work, "sub")} {
		mustMkdir(t, d)
	}
	mustWrite(t, f.secret, secretText)
	mustWrite(t, filepath.Join(f.work, "inside.txt"), "inside")
	mustWrite(t, filepath.Join(f.ro, "ref.txt"), "reference")
	cfg := Config{Dir: f.work, ReadOnly: []string{f.ro}}
	if mod != nil {
		mod(&cfg)
	}
	ws, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	f.ws = ws
	return f
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// read resolves name against the working directory and reads it.
func (f *fixture) read(name string) (string, error) {
	p, err := f.ws.Resolve(name, "")
	if err != nil {
		return "", err
	}
	data, _, err := f.ws.ReadFile(p, 0)
	return string(data), err
}

func isDenied(err error) bool {
	var de *DeniedError
	return errors.As(err, &de)
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]Config{
		"relative dir":     {Dir: "work"},
		"empty dir":        {},
		"missing dir":      {Dir: filepath.Join(dir, "missing")},
		"relative root":    {Dir: dir, ReadOnly: []string{"ro"}},
		"missing ro root":  {Dir: dir, ReadOnly: []string{filepath.Join(dir, "nope")}},
		"bad deny pattern": {Dir: dir, Deny: []string{"[oops"}},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			if ws, err := New(cfg); err == nil {
				ws.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestResolve(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		path, cwd string
		wantAbs   string
		wantRoot  string
		wantRel   string
		writable  bool
		denied    string // substring of the DeniedError, "" for success
	}{
		{path: "inside.txt", wantAbs: f.work + "/inside.txt", wantRoot: f.work, wantRel: "inside.txt", writable: true},
		{path: "x.txt", cwd: f.work + "/sub", wantAbs: f.work + "/sub/x.txt", wantRoot: f.work, wantRel: "sub/x.txt", writable: true},
		{path: f.work, wantAbs: f.work, wantRoot: f.work, wantRel: ".", writable: true},
		{path: "sub/../inside.txt", wantAbs: f.work + "/inside.txt", wantRoot: f.work, wantRel: "inside.txt", writable: true},
		{path: f.ro + "/ref.txt", wantAbs: f.ro + "/ref.txt", wantRoot: f.ro, wantRel: "ref.txt"},
		{path: "../outside/secret", denied: "Access to " + f.secret + " was denied: it is outside the directories this session may use (" + f.work + " (read-write), " + f.ro + " (read-only))."},
		{path: f.work + "/../../../../etc/passwd", denied: "/etc/passwd was denied: it is outside"},
		{path: "/proc/self/root" + f.secret, denied: "is outside the directories"},
		{path: "/proc/self/cwd/inside.txt", denied: "is outside the directories"},
		{path: f.work + "x/file", denied: "is outside the directories"},
		{path: ".env", denied: `Access to ` + f.work + `/.env was denied: it matches the protected-file pattern "**/.env".`},
		{path: "deep/.ssh/config", denied: `matches the protected-file pattern "**/.ssh/**"`},
		{path: "keys/server.pem", denied: `"**/*.pem"`},
		{path: "id_rsa.pub", denied: `"**/id_rsa*"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := f.ws.Resolve(tt.path, tt.cwd)
			if tt.denied != "" {
				if !isDenied(err) || !strings.Contains(err.Error(), tt.denied) {
					t.Fatalf("Resolve(%q) = %+v, %v; want DeniedError containing %q", tt.path, p, err, tt.denied)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Abs != tt.wantAbs || p.Root != tt.wantRoot || p.Rel != tt.wantRel || p.Writable != tt.writable {
				t.Errorf("Resolve(%q) = %+v; want abs %s root %s rel %s writable %v", tt.path, p, tt.wantAbs, tt.wantRoot, tt.wantRel, tt.writable)
			}
		})
	}
}

func TestMostSpecificRootWins(t *testing.T) {
	base := t.TempDir()
	vendor := filepath.Join(base, "vendor")
	mustMkdir(t, vendor)
	ws, err := New(Config{Dir: base, ReadOnly: []string{vendor}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	p, err := ws.Resolve("vendor/lib.go", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Writable || p.Root != vendor {
		t.Errorf("vendor path resolved to %+v, want the read-only root", p)
	}
	if _, err := ws.WriteFile(p, []byte("x")); !isDenied(err) {
		t.Errorf("write into nested read-only root: %v, want DeniedError", err)
	}
}

// TestSymlinks covers links inside the root, links leading out, and links
// that only os.Root would refuse although they end inside the roots.
func TestSymlinks(t *testing.T) {
	f := newFixture(t, nil)
	w := f.work
	mustSymlink(t, f.secret, w+"/abs-out")
	mustSymlink(t, "../outside/secret", w+"/rel-out")
	mustSymlink(t, "chain2", w+"/chain1")
	mustSymlink(t, "sub/chain3", w+"/chain2")
	mustSymlink(t, "../../outside/secret", w+"/sub/chain3")
	mustSymlink(t, "/proc/self/root"+f.secret, w+"/proc-root")
	mustSymlink(t, "../../../../../../../../proc/self/cwd", w+"/proc-cwd")
	mustSymlink(t, f.outside, w+"/dir-out")
	mustSymlink(t, "inside.txt", w+"/rel-in")
	mustSymlink(t, w+"/inside.txt", w+"/abs-in")
	mustSymlink(t, "sub", w+"/subdir-link")
	mustWrite(t, w+"/sub/x.txt", "x")
	mustSymlink(t, f.ro+"/ref.txt", w+"/to-ro")
	mustSymlink(t, "loop2", w+"/loop1")
	mustSymlink(t, "loop1", w+"/loop2")

	tests := []struct {
		name, want string
		denied     bool
	}{
		{name: "abs-out", denied: true},
		{name: "rel-out", denied: true},
		{name: "chain1", denied: true},
		{name: "proc-root", denied: true},
		{name: "proc-cwd/etc/passwd", denied: true},
		{name: "dir-out/secret", denied: true},
		{name: "rel-in", want: "inside"},
		{name: "abs-in", want: "inside"},
		{name: "subdir-link/x.txt", want: "x"},
		{name: "to-ro", want: "reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.read(tt.name)
			if strings.Contains(got, secretText) {
				t.Fatalf("read %s leaked the secret", tt.name)
			}
			if tt.denied {
				if !isDenied(err) {
					t.Fatalf("read %s: %q, %v; want DeniedError", tt.name, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("read %s = %q, %v; want %q", tt.name, got, err, tt.want)
			}
		})
	}
	t.Run("link message", func(t *testing.T) {
		_, err := f.read("abs-out")
		want := "Access to " + w + "/abs-out was denied: it leads through a symbolic link to " + f.secret + ", which is outside the directories this session may use"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("got %v\nwant prefix %s", err, want)
		}
	})
	t.Run("loop", func(t *testing.T) {
		if _, err := f.read("loop1"); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("read loop1: %v, want ELOOP", err)
		}
	})
	t.Run("write through link out", func(t *testing.T) {
		for _, name := range []string{"abs-out", "rel-out", "dir-out/new", "chain1"} {
			p, err := f.ws.Resolve(name, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.ws.WriteFile(p, []byte("pwned")); !isDenied(err) {
				t.Errorf("write %s: %v, want DeniedError", name, err)
			}
		}
		assertFile(t, f.secret, secretText)
		if _, err := os.Stat(f.outside + "/new"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("write created a file outside: %v", err)
		}
	})
	t.Run("write through link into read-only root", func(t *testing.T) {
		p, _ := f.ws.Resolve("to-ro", "")
		if _, err := f.ws.WriteFile(p, []byte("changed")); !isDenied(err) {
			t.Errorf("write to-ro: %v, want DeniedError", err)
		}
		assertFile(t, f.ro+"/ref.txt", "reference")
	})
	t.Run("write through link inside keeps the link", func(t *testing.T) {
		p, _ := f.ws.Resolve("abs-in", "")
		if _, err := f.ws.WriteFile(p, []byte("new")); err != nil {
			t.Fatal(err)
		}
		assertFile(t, w+"/inside.txt", "new")
		if fi, err := os.Lstat(w + "/abs-in"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("abs-in is no longer a link: %v", err)
		}
	})
}

func assertFile(t *testing.T, name, want string) {
	t.Helper()
	got, err := os.ReadFile(name)
	if err != nil || string(got) != want {
		t.Errorf("%s = %q, %v; want %q", name, got, err, want)
	}
}

// TestSymlinkSwapRace flips a link between an allowed target and an
// outside one while reads and writes go through it: whatever the timing,
// nothing outside may be read or written.
func TestSymlinkSwapRace(t *testing.T) {
	f := newFixture(t, nil)
	w := f.work
	mustMkdir(t, w+"/target-dir")
	targets := []struct{ file, dir string }{
		{"inside.txt", "target-dir"},
		{f.secret, f.outside},
		{"../outside/secret", "../outside"},
	}
	swap(t, targets[0].file, w+"/flip")
	swap(t, targets[0].dir, w+"/flipdir")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			tg := targets[i%len(targets)]
			swap(t, tg.file, w+"/flip")
			swap(t, tg.dir, w+"/flipdir")
		}
	})
	const rounds = 3000
	reads, writes := 0, 0
	for i := range rounds {
		p, err := f.ws.Resolve("flip", "")
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := f.ws.ReadFile(p, 0)
		if strings.Contains(string(data), secretText) {
			t.Fatalf("round %d: read the secret through a swapped link", i)
		}
		if err == nil {
			reads++
		}
		q, err := f.ws.Resolve("flipdir/planted", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ws.WriteFile(q, []byte("planted")); err == nil {
			writes++
		}
	}
	cancel()
	wg.Wait()
	assertFile(t, f.secret, secretText)
	if _, err := os.Stat(f.outside + "/planted"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a write landed outside: %v", err)
	}
	t.Logf("%d of %d reads and %d writes went through while the link flipped", reads, rounds, writes)
}

// swap points the link name at target atomically (new link, then rename).
func swap(t *testing.T, target, name string) {
	tmp := name + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Error(err)
	}
}

func TestHardLinks(t *testing.T) {
	f := newFixture(t, nil)
	if err := os.Link(f.secret, f.work+"/hl"); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	got, err := f.read("hl")
	if !isDenied(err) || got != "" {
		t.Fatalf("read hard link = %q, %v; want DeniedError", got, err)
	}
	want := "Access to " + f.work + "/hl was denied: the file has 2 hard links, and a hard link can reach a file outside the directories this session may use."
	if err.Error() != want {
		t.Errorf("message %q\nwant %q", err, want)
	}
	p, _ := f.ws.Resolve("hl", "")
	if _, err := f.ws.WriteFile(p, []byte("x")); !isDenied(err) {
		t.Errorf("write hard link: %v, want DeniedError", err)
	}
	assertFile(t, f.secret, secretText)

	allowed := newFixture(t, func(c *Config) { c.AllowHardLinks = true })
	if err := os.Link(allowed.secret, allowed.work+"/hl"); err != nil {
		t.Fatal(err)
	}
	if got, err := allowed.read("hl"); err != nil || got != secretText {
		t.Errorf("with AllowHardLinks: %q, %v", got, err)
	}
}

func TestDenyThroughLinks(t *testing.T) {
	f := newFixture(t, nil)
	w := f.work
	mustMkdir(t, w+"/.ssh")
	mustWrite(t, w+"/.ssh/id_ed25519", "KEY")
	mustSymlink(t, ".ssh/id_ed25519", w+"/notes.txt")
	mustSymlink(t, ".ssh", w+"/keys")
	if got, err := f.read("notes.txt"); !isDenied(err) || got != "" {
		t.Errorf("read link to key = %q, %v; want DeniedError", got, err)
	} else if want := `Access to ` + w + `/notes.txt was denied: it leads to ` + w + `/.ssh/id_ed25519, which matches the protected-file pattern "**/.ssh/**".`; err.Error() != want {
		t.Errorf("message %q\nwant %q", err, want)
	}
	p, _ := f.ws.Resolve("keys/authorized_keys", "")
	if _, err := f.ws.WriteFile(p, []byte("ssh-ed25519 AAAA")); !isDenied(err) {
		t.Errorf("write through dir link into .ssh: %v, want DeniedError", err)
	}
	if _, err := os.Stat(w + "/.ssh/authorized_keys"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("authorized_keys was written")
	}
	entries, _ := os.ReadDir(w + "/.ssh")
	if len(entries) != 1 {
		t.Errorf("temporary file left in .ssh: %v", entries)
	}
}

func TestCustomDeny(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Deny = []string{"*.secret", "/" + "etc/**"} })
	mustWrite(t, f.work+"/.env", "A=1")
	if got, err := f.read(".env"); err != nil || got != "A=1" {
		t.Errorf("custom deny list should replace the default: %q, %v", got, err)
	}
	if _, err := f.read("a/b.secret"); !isDenied(err) {
		t.Errorf("a/b.secret: %v, want DeniedError", err)
	}
	if got := f.ws.DenyPatterns(); !slices.Equal(got, []string{"**/*.secret", "/etc/**"}) {
		t.Errorf("DenyPatterns = %q", got)
	}
}

func TestReadOnlyRoot(t *testing.T) {
	f := newFixture(t, nil)
	p, err := f.ws.Resolve(f.ro+"/ref.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := f.ws.ReadFile(p, 0); err != nil || string(data) != "reference" {
		t.Fatalf("read = %q, %v", data, err)
	}
	_, err = f.ws.WriteFile(p, []byte("changed"))
	want := "Writing to " + f.ro + "/ref.txt was denied: it lies in the read-only directory " + f.ro + "; this session may change files only under " + f.work + "."
	if !isDenied(err) || err.Error() != want {
		t.Errorf("write = %v\nwant %s", err, want)
	}
	q, _ := f.ws.Resolve(f.ro+"/newdir", "")
	if err := f.ws.MkdirAll(q); !isDenied(err) {
		t.Errorf("mkdir in read-only root: %v", err)
	}
	assertFile(t, f.ro+"/ref.txt", "reference")
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t, nil)
	w := f.work
	t.Run("new file with parents", func(t *testing.T) {
		p, _ := f.ws.Resolve("a/b/c.txt", "")
		fi, err := f.ws.WriteFile(p, []byte("hello"))
		if err != nil {
			t.Fatal(err)
		}
		assertFile(t, w+"/a/b/c.txt", "hello")
		if fi.Mode().Perm() != 0o644 || fi.Size() != 5 {
			t.Errorf("new file: mode %v size %d", fi.Mode(), fi.Size())
		}
		st, _ := os.Stat(w + "/a/b/c.txt")
		if !st.ModTime().Equal(fi.ModTime()) {
			t.Errorf("returned mtime %v, file has %v", fi.ModTime(), st.ModTime())
		}
	})
	t.Run("keeps mode", func(t *testing.T) {
		mustWrite(t, w+"/script.sh", "#!/bin/sh\n")
		os.Chmod(w+"/script.sh", 0o750)
		p, _ := f.ws.Resolve("script.sh", "")
		if _, err := f.ws.WriteFile(p, []byte("#!/bin/sh\necho hi\n")); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(w + "/script.sh")
		if st.Mode().Perm() != 0o750 {
			t.Errorf("mode %v, want 0750", st.Mode().Perm())
		}
	})
	t.Run("directory", func(t *testing.T) {
		p, _ := f.ws.Resolve("sub", "")
		if _, err := f.ws.WriteFile(p, []byte("x")); err == nil {
			t.Error("writing over a directory succeeded")
		}
		p, _ = f.ws.Resolve(".", "")
		if _, err := f.ws.WriteFile(p, []byte("x")); !errors.Is(err, syscall.EISDIR) {
			t.Errorf("writing the root: %v", err)
		}
	})
	t.Run("no temporary files left", func(t *testing.T) {
		var left []string
		filepath.WalkDir(w, func(path string, d fs.DirEntry, err error) error {
			if strings.HasPrefix(d.Name(), ".toolwire-") {
				left = append(left, path)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
}

func TestSpecialFiles(t *testing.T) {
	f := newFixture(t, nil)
	if err := syscall.Mkfifo(f.work+"/fifo", 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Opening a FIFO for reading would block forever; it must be refused.
	if _, err := f.read("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("read fifo: %v, want ErrNotRegular", err)
	}
}

func TestReadFileLimit(t *testing.T) {
	f := newFixture(t, nil)
	mustWrite(t, f.work+"/big", strings.Repeat("x", 100))
	p, _ := f.ws.Resolve("big", "")
	if _, _, err := f.ws.ReadFile(p, 99); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over limit: %v", err)
	}
	if data, _, err := f.ws.ReadFile(p, 100); err != nil || len(data) != 100 {
		t.Errorf("ReadFile at limit: %d bytes, %v", len(data), err)
	}
	if _, _, err := f.ws.ReadFile(Path{Abs: "/x"}, 0); err == nil {
		t.Error("unresolved Path accepted")
	}
}

func TestWalk(t *testing.T) {
	f := newFixture(t, nil)
	w := f.work
	mustMkdir(t, w+"/.ssh")
	mustWrite(t, w+"/.ssh/id_rsa", "KEY")
	mustWrite(t, w+"/.env", "X=1")
	mustWrite(t, w+"/sub/y.txt", "y")
	mustSymlink(t, f.outside, w+"/out-link")
	p, _ := f.ws.Resolve(".", "")
	var got []string
	err := f.ws.Walk(context.Background(), p, func(rel string, d fs.DirEntry) error {
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"inside.txt", "out-link", "sub", "sub/y.txt"}
	if !slices.Equal(got, want) {
		t.Errorf("Walk = %q, want %q", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.ws.Walk(ctx, p, func(string, fs.DirEntry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk with cancelled ctx: %v", err)
	}
	q, _ := f.ws.Resolve("inside.txt", "")
	if err := f.ws.Walk(context.Background(), q, nil); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Walk of a file: %v", err)
	}
}

func TestRealPath(t *testing.T) {
	f := newFixture(t, nil)
	mustSymlink(t, "sub", f.work+"/s")
	p, _ := f.ws.Resolve("s", "")
	got, err := f.ws.RealPath(p)
	real, _ := filepath.EvalSymlinks(f.work + "/sub")
	if err != nil || got != real {
		t.Errorf("RealPath = %q, %v; want %q", got, err, real)
	}
}

func TestLstat(t *testing.T) {
	f := newFixture(t, nil)
	mustSymlink(t, f.work+"/sub", f.work+"/abs-sub")
	mustWrite(t, f.work+"/sub/x", "x")
	mustSymlink(t, "x", f.work+"/sub/x-link")
	p, _ := f.ws.Resolve("abs-sub/x-link", "")
	fi, err := f.ws.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat through absolute dir link = %v, %v; want the link itself", fi, err)
	}
	p, _ = f.ws.Resolve("missing", "")
	if _, err := f.ws.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat missing: %v", err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	p, _ := f.ws.Resolve("inside.txt", "")
	if err := f.ws.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.ws.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ws.Stat(p); err == nil {
		t.Error("Stat after Close succeeded")
	}
}

func TestRootNamedThroughLink(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real-project")
	mustMkdir(t, real+"/vendor")
	link := filepath.Join(base, "a-much-longer-link-name")
	mustSymlink(t, real, link)
	ws, err := New(Config{Dir: link, ReadOnly: []string{real + "/vendor", base + "/ro-twice"}, ReadWrite: []string{base + "/ro-twice"}})
	if err == nil {
		ws.Close()
		t.Fatal("missing root accepted")
	}
	mustMkdir(t, base+"/both")
	ws, err = New(Config{Dir: link, ReadOnly: []string{real + "/vendor", base + "/both"}, ReadWrite: []string{base + "/both"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	tests := []struct {
		path, root string
		writable   bool
	}{
		{link + "/main.go", link, true},
		{real + "/main.go", link, true}, // the real name of the working directory
		{real + "/vendor/lib.go", real + "/vendor", false},
		{link + "/vendor/lib.go", real + "/vendor", false}, // the same vendor directory under the link's name
		{base + "/both/x", base + "/both", false},
	}
	for _, tt := range tests {
		p, err := ws.Resolve(tt.path, "")
		if err != nil || p.Root != tt.root || p.Writable != tt.writable {
			t.Errorf("Resolve(%s) = %+v, %v; want root %s writable %v", tt.path, p, err, tt.root, tt.writable)
		}
	}
}

// TestNestedReadOnlyThroughLink reaches a read-only root nested in the
// working directory through a link inside the working directory: writes
// must still be refused.
func TestNestedReadOnlyThroughLink(t *testing.T) {
	base := t.TempDir()
	mustMkdir(t, base+"/vendor")
	mustWrite(t, base+"/vendor/lib.go", "package lib\n")
	mustSymlink(t, "vendor", base+"/v2")
	ws, err := New(Config{Dir: base, ReadOnly: []string{base + "/vendor"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, name := range []string{"v2/lib.go", "v2/new.go"} {
		p, err := ws.Resolve(name, "")
		if err != nil || !p.Writable {
			t.Fatalf("Resolve(%s) = %+v, %v", name, p, err)
		}
		_, err = ws.WriteFile(p, []byte("package evil\n"))
		want := "Writing to " + base + "/" + name + " was denied: it leads to " + base + "/vendor/" + filepath.Base(name) + ", in the read-only directory " + base + "/vendor; this session may change files only under " + base + "."
		if !isDenied(err) || err.Error() != want {
			t.Errorf("write %s: %v\nwant %s", name, err, want)
		}
	}
	assertFile(t, base+"/vendor/lib.go", "package lib\n")
	if _, err := os.Stat(base + "/vendor/new.go"); !errors.Is(err, fs.ErrNotExist) {
		t.Error("new.go was created in the read-only root")
	}
}

func TestNewFileBelongsToItsDirectoryOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, err := w.Resolve("new.txt", dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteFile(p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
		t.Fatalf("new file owned by %d:%d, want the directory's 65534:65534", st.Uid, st.Gid)
	}
}

// TestDirectOpen checks which opens take the direct path (one openat2 from
// the root, no links) and that it applies the walk's rules: the deny
// patterns on the real path, hard links, non-regular files.
func TestDirectOpen(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real-project")
	link := filepath.Join(base, "project")
	mustMkdir(t, real+"/a/b")
	mustMkdir(t, real+"/private")
	mustSymlink(t, real, link)
	mustWrite(t, real+"/a/b/deep.txt", "deep")
	mustWrite(t, real+"/private/key", "KEY")
	mustSymlink(t, "a/b", real+"/to-b")
	mustWrite(t, real+"/a/twice.txt", "twice")
	if err := os.Link(real+"/a/twice.txt", real+"/hard.txt"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(real+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	// The working directory is named through a link; the deny patterns
	// name real paths only. A nested read-only root, configured by its
	// real path, is reached through the outer root's link name.
	mustMkdir(t, real+"/vendor/private")
	mustWrite(t, real+"/vendor/private/key", "KEY")
	mustWrite(t, real+"/vendor/lib.go", "package lib")
	ws, err := New(Config{Dir: link, ReadOnly: []string{real + "/vendor"}, Deny: []string{real + "/private/**", real + "/vendor/private/**"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, r := range ws.roots {
		if r.dirConn == nil {
			t.Fatalf("root %s has no descriptor: the direct path is never taken", r.path)
		}
	}
	tests := []struct {
		name   string
		direct bool
		check  func(error) bool
		want   string
	}{
		{"a/b/deep.txt", true, nil, "deep"},
		{"a", true, nil, ""},
		{"to-b/deep.txt", false, nil, "deep"}, // a link: the walk follows it
		{"private/key", true, isDenied, ""},   // denied on its real path
		{"vendor/private/key", true, isDenied, ""},
		{"vendor/lib.go", true, nil, "package lib"},
		{"hard.txt", true, isDenied, ""}, // two hard links
		{"fifo", false, func(err error) bool { return errors.Is(err, ErrNotRegular) }, ""},
		{"missing.txt", false, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }, ""},
	}
	for _, tt := range tests {
		p, err := ws.Resolve(tt.name, "")
		if err != nil {
			t.Fatalf("Resolve(%s): %v", tt.name, err)
		}
		f, _, direct, err := ws.openDirect(p)
		if f != nil {
			f.Close()
		}
		if direct != tt.direct {
			t.Errorf("%s: direct path %v, want %v (err %v)", tt.name, direct, tt.direct, err)
		}
		// ReadSmall decides what the direct path decides for a regular
		// file, and leaves the rest to Open.
		data, sfi, small, serr := ws.ReadSmall(p, 1<<20)
		if wantSmall := tt.direct && tt.name != "a"; small != wantSmall {
			t.Errorf("ReadSmall(%s) decided %v, want %v (err %v)", tt.name, small, wantSmall, serr)
		}
		switch {
		case !small:
		case tt.check != nil:
			if !tt.check(serr) {
				t.Errorf("ReadSmall(%s) = %v, want a refusal", tt.name, serr)
			}
		case serr != nil || string(data) != tt.want:
			t.Errorf("ReadSmall(%s) = %q, %v; want %q", tt.name, data, serr, tt.want)
		default:
			ofi, err := os.Stat(filepath.Join(real, tt.name))
			if err != nil {
				t.Fatal(err)
			}
			if sfi.Size() != ofi.Size() || sfi.Mode() != ofi.Mode() || !sfi.ModTime().Equal(ofi.ModTime()) ||
				sfi.Name() != ofi.Name() || sfi.IsDir() || sfi.Sys().(*syscall.Stat_t).Ino != ofi.Sys().(*syscall.Stat_t).Ino {
				t.Errorf("ReadSmall(%s) info %v %v %v %v, want %v %v %v %v", tt.name, sfi.Name(), sfi.Size(), sfi.Mode(), sfi.ModTime(),
					ofi.Name(), ofi.Size(), ofi.Mode(), ofi.ModTime())
			}
			if _, _, ok, _ := ws.ReadSmall(p, int64(len(tt.want))-1); ok {
				t.Errorf("ReadSmall(%s) decided for a file over its limit", tt.name)
			}
		}
		// Open, whichever path it takes, gives the same answer.
		f, fi, err := ws.Open(p)
		switch {
		case tt.check != nil:
			if !tt.check(err) {
				t.Errorf("Open(%s) = %v, want a refusal", tt.name, err)
			}
		case err != nil:
			t.Errorf("Open(%s): %v", tt.name, err)
		case fi.IsDir():
		default:
			data, rerr := io.ReadAll(f)
			if rerr != nil || string(data) != tt.want {
				t.Errorf("Open(%s) read %q, %v; want %q", tt.name, data, rerr, tt.want)
			}
		}
		if f != nil {
			f.Close()
		}
	}
}

// TestDirectOpenAfterClose checks that an open after Close fails instead of
// using a descriptor number the kernel may have given to another file.
func TestDirectOpenAfterClose(t *testing.T) {
	f := newFixture(t, nil)
	p, err := f.ws.Resolve("inside.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	f.ws.Close()
	// Hand out descriptor numbers, the closed root's among them, to a
	// directory holding a file of the same name.
	mustWrite(t, filepath.Join(f.outside, "inside.txt"), secretText)
	for range 4 {
		d, err := os.Open(f.outside)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
	}
	if file, _, direct, _ := f.ws.openDirect(p); direct || file != nil {
		t.Error("the direct path was taken on a closed workspace")
	}
	if _, _, err := f.ws.Open(p); err == nil {
		t.Error("Open on a closed workspace succeeded")
	}
}
