package execsvc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// outputStore keeps the sessions' saved outputs (the whole output of a
// shortened Bash result, the output files of background shells) in
// <root>/<session>/, where they outlast their session: the conversation's
// transcript points at them, and a conversation that comes back later under
// the same session id (orchestrator --resume) finds them again.
//
// With a retention, directories of sessions that ended longer ago are
// removed when a session opens; without one they stay until whoever owns
// root removes them (orchestrator -p: with the conversation).
type outputStore struct {
	root      string
	retention time.Duration
	log       *slog.Logger

	mu        sync.Mutex // guards the fields below
	open      map[string]int
	lastSweep time.Time
}

// sweepEvery spaces the retention sweeps.
const sweepEvery = time.Minute

// newOutputStore returns the store of root (see PrepareOutputRoot). A nil
// log discards.
func newOutputStore(root string, retention time.Duration, log *slog.Logger) (*outputStore, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("saved-output directory %q: %w", root, err)
	}
	if err := PrepareOutputRoot(root); err != nil {
		return nil, fmt.Errorf("saved-output directory: %w", err)
	}
	return &outputStore{root: root, retention: retention, log: log, open: map[string]int{}}, nil
}

// PrepareOutputRoot creates dir, a Config.OutputRoot, if needed, and checks
// that it is this process's own and that no other user may write it, so
// that nobody else can put files or links where sessions' outputs go.
func PrepareOutputRoot(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	return ownDir(dir)
}

// ownDir checks that path is a directory (not a link to one) that belongs
// to this process's user and that nobody else may write.
func ownDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case st != nil && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to this process (uid %d)", path, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s may be written by other users (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

// safeID matches the session ids used as directory names as they are; the
// orchestrator's ids always match, so its store finds a conversation's
// outputs under the conversation's id.
var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// outputDirName returns the name of a session's directory: the id itself,
// or for an id that is not a safe file name, "_" and a hash of it (which
// no safe id can be).
func outputDirName(sessionID string) string {
	if safeID.MatchString(sessionID) {
		return sessionID
	}
	sum := sha256.Sum256([]byte(sessionID))
	return "_" + hex.EncodeToString(sum[:16])
}

// acquire returns the session's output directory, creating it or taking
// up the one an earlier session of the same id left. release, called when
// the session ends, removes it if it holds nothing, else takes it back
// from the session's user (see shareWith) and dates it.
func (o *outputStore) acquire(sessionID string) (dir string, release func(), err error) {
	o.sweep()
	name := outputDirName(sessionID)
	dir = filepath.Join(o.root, name)
	// Under the lock, so that a sweep cannot remove the directory between
	// here and the count that keeps it.
	o.mu.Lock()
	defer o.mu.Unlock()
	switch err := os.Mkdir(dir, 0o700); {
	case errors.Is(err, fs.ErrExist):
		if err := ownDir(dir); err != nil {
			return "", nil, fmt.Errorf("session output directory: %w", err)
		}
	case err != nil:
		return "", nil, fmt.Errorf("session output directory: %w", err)
	}
	o.open[name]++
	var once sync.Once
	release = func() {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.open[name]--; o.open[name] > 0 {
				return
			}
			delete(o.open, name)
			if os.Remove(dir) == nil {
				return
			}
			// Not empty: kept, dated now, and no longer shared with the
			// session's user, whose id may go to another session.
			_ = os.Chown(dir, -1, os.Getegid())
			_ = os.Chmod(dir, 0o700)
			now := time.Now()
			_ = os.Chtimes(dir, now, now)
		})
	}
	return dir, release, nil
}

// shareWith lets the tool processes of a session that run as another user
// (uid, gid) read dir, and nobody else: the directory stays this process's,
// its group becomes theirs. Files in it are created readable (0644).
func shareWith(dir string, uid, gid int) error {
	if os.Geteuid() != 0 || uid == os.Geteuid() {
		return nil
	}
	if err := os.Chown(dir, -1, gid); err != nil {
		return fmt.Errorf("session output directory: %w", err)
	}
	return os.Chmod(dir, 0o750)
}

// removeUnused removes the directory name unless a session uses it.
func (o *outputStore) removeUnused(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open[name] > 0 {
		return
	}
	if err := os.RemoveAll(filepath.Join(o.root, name)); err != nil {
		o.log.Warn("saved outputs: cannot remove an expired session's", "session_dir", name, "error", err)
		return
	}
	o.log.Info("saved outputs removed after the retention", "session_dir", name, "retention", o.retention)
}

// sweep removes the directories of sessions that ended longer than the
// retention ago, at most once every sweepEvery.
func (o *outputStore) sweep() {
	if o.retention <= 0 {
		return
	}
	o.mu.Lock()
	if time.Since(o.lastSweep) < sweepEvery {
		o.mu.Unlock()
		return
	}
	o.lastSweep = time.Now()
	o.mu.Unlock()
	entries, err := os.ReadDir(o.root)
	if err != nil {
		o.log.Warn("saved outputs: cannot list the output directory", "dir", o.root, "error", err)
		return
	}
	cutoff := time.Now().Add(-o.retention)
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.IsDir() || !fi.ModTime().Before(cutoff) {
			continue
		}
		o.removeUnused(e.Name())
	}
}
