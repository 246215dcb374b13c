package execsvc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// outputRoot returns a fresh directory of this process's that a tool user
// can reach, as toolsvc's default in the system temp directory is.
func outputRoot(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(d, "outputs")
}

// TestSavedOutputsOutlastTheirSession: a session's saved outputs live in
// OutputRoot/<id>/, outside its temp dir; its processes may read them and
// not change them; they stay when the session ends, and the next session
// of the same id finds them.
//
// The tools run as the executor's own user, as orchestrator -p runs them:
// only the sandbox, not file permissions, keeps them from the files.
func TestSavedOutputsOutlastTheirSession(t *testing.T) {
	outputs := outputRoot(t)
	cfg := Config{Root: sandboxtest.Dir(t), TempRoot: sandboxtest.Dir(t), OutputRoot: outputs,
		Sandbox: sandbox.Config{RunAsUser: strconv.Itoa(os.Geteuid())}}
	store, err := newOutputStore(cfg.OutputRoot, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	factory := factoryWith(t, cfg, nil, store)

	env, _ := openEnv(t, factory, "conv-1", "")
	dir := filepath.Join(outputs, "conv-1")
	if env.OutputDir != dir || strings.HasPrefix(env.OutputDir, env.TempDir) {
		t.Fatalf("output dir %s (temp dir %s), want %s", env.OutputDir, env.TempDir, dir)
	}
	saved := filepath.Join(dir, "toolu_1.txt")
	if err := os.WriteFile(saved, []byte("the whole output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := bash(t, env, "cat "+saved+"; echo x >> "+saved+" || echo append refused; touch "+dir+"/new || echo create refused; rm -f "+saved+" || echo remove refused")
	for _, want := range []string{"the whole output", "append refused", "create refused", "remove refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("a tool process on the saved outputs printed %q, want %q", out, want)
		}
	}
	if b, _ := os.ReadFile(saved); string(b) != "the whole output\n" {
		t.Fatalf("a tool process changed a saved output: %q", b)
	}

	env.Close()
	if _, err := os.Stat(env.TempDir); err == nil {
		t.Error("the session's temp dir outlived it")
	}
	if b, err := os.ReadFile(saved); err != nil || string(b) != "the whole output\n" {
		t.Fatalf("saved output after the session ended: %q %v", b, err)
	}
	again, _ := openEnv(t, factory, "conv-1", "")
	if again.OutputDir != dir || bash(t, again, "cat "+saved) != "the whole output\n" {
		t.Fatalf("the next session of conv-1 does not find its outputs in %s", again.OutputDir)
	}

	// A session that saved nothing leaves no directory behind; an id that
	// is no file name gets one of its own all the same.
	empty, _ := openEnv(t, factory, "../odd id", "")
	if filepath.Dir(empty.OutputDir) != outputs || !strings.HasPrefix(filepath.Base(empty.OutputDir), "_") {
		t.Errorf("output dir of an odd id: %s", empty.OutputDir)
	}
	empty.Close()
	if _, err := os.Stat(empty.OutputDir); err == nil {
		t.Error("an empty output dir outlived its session")
	}
}

// TestSavedOutputsOfOneSessionUserAreHidFromAnother: with a user per
// session, a session's tool user reads its own saved outputs and another
// session's cannot.
func TestSavedOutputsOfOneSessionUserAreHidFromAnother(t *testing.T) {
	needRoot(t)
	outputs := outputRoot(t)
	cfg := Config{Root: sandboxtest.Dir(t), SessionDirs: true, SessionUIDs: testIDs, TempRoot: sandboxtest.Dir(t), OutputRoot: outputs}
	pool, err := sandbox.NewUIDPool(testIDs)
	if err != nil {
		t.Fatal(err)
	}
	store, err := newOutputStore(cfg.OutputRoot, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	factory := factoryWith(t, cfg, pool, store)
	a, _ := openEnv(t, factory, "a", "")
	b, _ := openEnv(t, factory, "b", "")
	saved := filepath.Join(a.OutputDir, "toolu_1.txt")
	if err := os.WriteFile(saved, []byte("a's output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := bash(t, a, "cat "+saved); out != "a's output\n" {
		t.Errorf("a's tool user reading its saved output: %q", out)
	}
	if out := bash(t, b, "cat "+saved+" 2>&1"); strings.Contains(out, "a's output") {
		t.Errorf("b's tool user read a's saved output: %q", out)
	}

	// Once a ends, its user id may go to another session: the directory
	// is no longer shared with it.
	a.Close()
	fi, err := os.Stat(filepath.Dir(saved))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != os.Getegid() || fi.Mode().Perm() != 0o700 {
		t.Errorf("a's output dir after a ended: group %d mode %v, want %d and 0700", st.Gid, fi.Mode().Perm(), os.Getegid())
	}
}

// TestOutputRetention: directories of sessions that ended longer than the
// retention ago go when a session opens; newer ones and those in use stay.
func TestOutputRetention(t *testing.T) {
	outputs := outputRoot(t)
	store, err := newOutputStore(outputs, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, name := range []string{"expired", "recent", "in-use"} {
		if err := os.MkdirAll(filepath.Join(outputs, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outputs, name, "f.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if name != "recent" {
			if err := os.Chtimes(filepath.Join(outputs, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	store.lastSweep = time.Now() // the next acquire does not sweep yet
	_, release, err := store.acquire("in-use")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(outputs, "in-use"), old, old); err != nil {
		t.Fatal(err)
	}
	store.lastSweep = time.Time{}
	_, releaseNew, err := store.acquire("new")
	if err != nil {
		t.Fatal(err)
	}
	releaseNew()
	for name, kept := range map[string]bool{"expired": false, "recent": true, "in-use": true} {
		if _, err := os.Stat(filepath.Join(outputs, name, "f.txt")); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
	release()
	if fi, err := os.Stat(filepath.Join(outputs, "in-use")); err != nil || time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("a directory kept after its session is not dated from its end: %v %v", fi, err)
	}
}

func TestOutputRootMustBeOurs(t *testing.T) {
	d := t.TempDir()
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := PrepareOutputRoot(d); err == nil || !strings.Contains(err.Error(), "written by other users") {
		t.Fatalf("a directory anyone may write was accepted: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := PrepareOutputRoot(link); err == nil {
		t.Fatal("a link was accepted as the output directory")
	}
}
