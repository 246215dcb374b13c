package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNotRegular is returned for paths that are neither regular files nor
// directories (devices, FIFOs, sockets): the workspace never opens those.
var ErrNotRegular = errors.New("not a regular file or directory")

// ErrTooLarge is returned by ReadFile for a file above its size limit.
var ErrTooLarge = errors.New("file too large")

// maxLinks bounds how many symbolic links one path may pass through, as the
// kernel's own limit does.
const maxLinks = 40

// Open opens the regular file or directory at p for reading and returns it
// with its FileInfo. Symbolic links are followed while they stay inside the
// roots; the file actually opened is checked against the deny patterns and
// the hard-link rule.
func (w *Workspace) Open(p Path) (*os.File, fs.FileInfo, error) {
	f, fi, _, err := w.open(p)
	return f, fi, err
}

// Stat returns the FileInfo of the regular file or directory at p,
// following symbolic links inside the roots, with Open's checks.
func (w *Workspace) Stat(p Path) (fs.FileInfo, error) {
	f, fi, err := w.Open(p)
	if err != nil {
		return nil, err
	}
	f.Close()
	return fi, nil
}

// Lstat returns the FileInfo of p itself, not following a final symbolic
// link.
func (w *Workspace) Lstat(p Path) (fs.FileInfo, error) {
	if err := w.check(p); err != nil {
		return nil, err
	}
	fi, err := p.root.fs.Lstat(p.Rel)
	if w.isEscape(err) && p.Rel != "." {
		// A link among the parent directories: follow those, keep the base.
		var parent Path
		if parent, err = w.followLinks(w.parentOf(p)); err != nil {
			return nil, err
		}
		if p, err = w.Resolve(filepath.Join(parent.Abs, filepath.Base(p.Abs)), ""); err != nil {
			return nil, err
		}
		fi, err = p.root.fs.Lstat(p.Rel)
	}
	if err != nil {
		return nil, w.mapErr(p, err)
	}
	return fi, nil
}

// ReadFile returns the content of the regular file at p and its FileInfo.
// A positive limit bounds the size; a larger file fails with ErrTooLarge.
func (w *Workspace) ReadFile(p Path, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := w.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.IsDir() {
		return nil, nil, &fs.PathError{Op: "read", Path: p.Abs, Err: syscall.EISDIR}
	}
	if limit > 0 && fi.Size() > limit {
		return nil, nil, &fs.PathError{Op: "read", Path: p.Abs, Err: ErrTooLarge}
	}
	data, err := ReadAll(f, fi.Size(), limit)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "read", Path: p.Abs, Err: err}
	}
	return data, fi, nil
}

// ReadAll reads r to its end. size is a hint for the buffer; a positive limit
// makes it fail with ErrTooLarge once more than limit bytes arrive, so a file
// that grows while it is read cannot exhaust memory.
func ReadAll(r io.Reader, size, limit int64) ([]byte, error) {
	if limit > 0 {
		size = min(size, limit)
		r = io.LimitReader(r, limit+1)
	}
	buf := make([]byte, 0, max(size, 0)+512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if limit > 0 && int64(len(buf)) > limit {
		return nil, ErrTooLarge
	}
	return buf, nil
}

// WriteFile replaces the content of the file at p with data, atomically: it
// writes a temporary file in the same directory and renames it over the
// target, keeping the old file's permissions (0644 for a new file) and, when
// it may, its owner. Missing parent directories are created. A final
// symbolic link is written through, not replaced. It returns the FileInfo
// of the new file.
func (w *Workspace) WriteFile(p Path, data []byte) (fs.FileInfo, error) {
	return w.write(p, data, nil)
}

// write is WriteFile, with the mode given (permission bits, setuid,
// setgid and sticky) instead of the present file's when mode is not nil.
func (w *Workspace) write(p Path, data []byte, mode *fs.FileMode) (fs.FileInfo, error) {
	p, err := w.ResolveWrite(p)
	if err != nil {
		return nil, err
	}
	if p.Rel == "." {
		return nil, &fs.PathError{Op: "write", Path: p.Abs, Err: syscall.EISDIR}
	}
	dirRel, base := path.Split(p.Rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if dirRel == "" {
		dirRel = "."
	} else if err := p.root.fs.MkdirAll(dirRel, 0o755); err != nil {
		return nil, w.mapErr(p, err)
	}
	dir, err := p.root.fs.OpenRoot(dirRel)
	if err != nil {
		return nil, w.mapErr(p, err)
	}
	defer dir.Close()

	perm, uid, gid := fs.FileMode(0o644), -1, -1
	switch old, err := dir.Lstat(base); {
	case err == nil:
		if err := w.checkExisting(p, old); err != nil {
			return nil, err
		}
		perm = old.Mode().Perm()
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, w.mapErr(p, err)
	default:
		// A new file belongs to whoever owns its directory, so that a
		// service running as root does not leave files the session's
		// unprivileged tool user cannot change.
		if fi, err := dir.Stat("."); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		}
	}
	if mode != nil {
		perm = *mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	}
	return w.replace(p, dir, base, data, perm, uid, gid)
}

// replace writes data to a temporary file in dir and renames it to base.
func (w *Workspace) replace(p Path, dir *os.Root, base string, data []byte, perm fs.FileMode, uid, gid int) (fs.FileInfo, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".toolwire-" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, w.mapErr(p, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			dir.Remove(tmp)
		}
	}()
	// The directory may have been reached through links: check where the
	// file really lands, which may be a protected file or a read-only root
	// nested in this one.
	if real := fdPath(f); real != "" {
		target := filepath.Join(filepath.Dir(real), base)
		if pat, ok := w.Denied(target); ok {
			return nil, w.refuse(p.Abs, fmt.Sprintf("Access to %s was denied: it leads to %s, which matches the protected-file pattern %q.", p.Abs, target, pat))
		}
		if r, _ := w.rootOf(target); r != nil && !r.writable {
			return nil, w.refuse(p.Abs, fmt.Sprintf("Writing to %s was denied: it leads to %s, in the read-only directory %s; this session may change files only under %s.", p.Abs, target, r.path, w.writableList()))
		}
	}
	if _, err := f.Write(data); err != nil {
		return nil, fmt.Errorf("write %s: %w", p.Abs, err)
	}
	if err := f.Chmod(perm); err != nil {
		return nil, fmt.Errorf("write %s: %w", p.Abs, err)
	}
	if uid >= 0 && (uid != os.Getuid() || gid != os.Getgid()) {
		_ = f.Chown(uid, gid) // best effort: only privileged processes may give files away
	}
	if w.durable {
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("write %s: %w", p.Abs, err)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", p.Abs, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", p.Abs, err)
	}
	if err := dir.Rename(tmp, base); err != nil {
		return nil, w.mapErr(p, err)
	}
	done = true
	return fi, nil
}

// ResolveWrite checks that p may be written and returns the path a write
// would change: the target of a final symbolic link, with links among the
// parents followed where they lead to another root. It fails with a
// *DeniedError for read-only roots and links leading outside.
func (w *Workspace) ResolveWrite(p Path) (Path, error) {
	if err := w.check(p); err != nil {
		return Path{}, err
	}
	fi, err := p.root.fs.Lstat(p.Rel)
	if (err == nil && fi.Mode()&fs.ModeSymlink != 0) || w.isEscape(err) {
		if p, err = w.followLinks(p); err != nil {
			return Path{}, err
		}
	}
	if !p.Writable {
		return Path{}, w.refuse(p.Abs, fmt.Sprintf("Writing to %s was denied: it lies in the read-only directory %s; this session may change files only under %s.", p.Abs, p.Root, w.writableList()))
	}
	return p, nil
}

// MkdirAll creates the directory p and any missing parents.
func (w *Workspace) MkdirAll(p Path) error {
	p, err := w.ResolveWrite(p)
	if err != nil {
		return err
	}
	if err := p.root.fs.MkdirAll(p.Rel, 0o755); err != nil {
		return w.mapErr(p, err)
	}
	return nil
}

// WalkFunc is called by Walk for each entry below the walked directory.
// rel is slash-separated and relative to that directory. Returning
// fs.SkipDir on a directory skips it; fs.SkipAll ends the walk.
type WalkFunc func(rel string, d fs.DirEntry) error

// Walk calls fn for every file and directory below the directory p, in
// lexical order, without following symbolic links and leaving out entries
// that match a deny pattern. Unreadable directories are skipped. It stops
// when ctx is done.
func (w *Workspace) Walk(ctx context.Context, p Path, fn WalkFunc) error {
	f, fi, p, err := w.open(p)
	if err != nil {
		return err
	}
	f.Close()
	if !fi.IsDir() {
		return &fs.PathError{Op: "walk", Path: p.Abs, Err: syscall.ENOTDIR}
	}
	sub, err := p.root.fs.OpenRoot(p.Rel)
	if err != nil {
		return w.mapErr(p, err)
	}
	defer sub.Close()
	real := ""
	if d, err := sub.Open("."); err == nil {
		real = fdPath(d)
		d.Close()
	}
	err = fs.WalkDir(sub.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if rel == "." {
				return err
			}
			return nil
		}
		if rel == "." {
			return nil
		}
		if w.deniedEntry(p.Abs, rel) || (real != "" && w.deniedEntry(real, rel)) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		return fn(rel, d)
	})
	if err != nil {
		return fmt.Errorf("walk %s: %w", p.Abs, err)
	}
	return nil
}

func (w *Workspace) deniedEntry(dir, rel string) bool {
	_, ok := w.Denied(dir + "/" + rel)
	return ok
}

// RealPath returns the path of the file or directory at p with every
// symbolic link resolved, as the kernel sees it once opened through the
// roots. Programs such as ripgrep can be pointed at it safely.
func (w *Workspace) RealPath(p Path) (string, error) {
	f, _, p, err := w.open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if real := fdPath(f); real != "" {
		return real, nil
	}
	return p.Abs, nil
}

// open is Open that also returns the path it ended at after following
// links that leave the root p was named in.
func (w *Workspace) open(p Path) (*os.File, fs.FileInfo, Path, error) {
	if err := w.check(p); err != nil {
		return nil, nil, Path{}, err
	}
	if f, fi, ok, err := w.openDirect(p); ok {
		return f, fi, p, err
	}
	fi, err := p.root.fs.Stat(p.Rel)
	if w.isEscape(err) {
		if p, err = w.followLinks(p); err != nil {
			return nil, nil, Path{}, err
		}
		fi, err = p.root.fs.Stat(p.Rel)
	}
	if err != nil {
		return nil, nil, Path{}, w.mapErr(p, err)
	}
	// Never open devices or FIFOs: opening one can block or have effects.
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, nil, Path{}, &fs.PathError{Op: "open", Path: p.Abs, Err: ErrNotRegular}
	}
	f, err := p.root.fs.OpenFile(p.Rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, Path{}, w.mapErr(p, err)
	}
	if fi, err = f.Stat(); err == nil {
		err = w.checkOpened(p, fi, fdPath(f))
	}
	if err != nil {
		f.Close()
		return nil, nil, Path{}, err
	}
	return f, fi, p, nil
}

// checkOpened applies the rules that need the file actually opened: its
// type (it may have been swapped since the Stat), the deny patterns on its
// real path (from the kernel, or known when no link was followed; "" when
// unknown) and the hard-link rule.
func (w *Workspace) checkOpened(p Path, fi fs.FileInfo, real string) error {
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return &fs.PathError{Op: "open", Path: p.Abs, Err: ErrNotRegular}
	}
	if real != "" && real != p.Abs {
		if pat, ok := w.Denied(real); ok {
			return w.refuse(p.Abs, fmt.Sprintf("Access to %s was denied: it leads to %s, which matches the protected-file pattern %q.", p.Abs, real, pat))
		}
	}
	return w.checkExisting(p, fi)
}

// checkExisting refuses what may not be read or replaced: non-regular
// files and, unless allowed, files with several hard links.
func (w *Workspace) checkExisting(p Path, fi fs.FileInfo) error {
	if fi.IsDir() {
		return nil
	}
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "open", Path: p.Abs, Err: ErrNotRegular}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && !w.allowHardLinks {
		return w.refuse(p.Abs, fmt.Sprintf("Access to %s was denied: the file has %d hard links, and a hard link can reach a file outside the directories this session may use.", p.Abs, st.Nlink))
	}
	return nil
}

// followLinks resolves, one at a time, the symbolic links among the
// components of p, checking each intermediate path against the roots and
// deny patterns. os.Root refuses absolute links and links into other
// roots; this lets those through when they end somewhere allowed. The
// result has no links left at the time of the check; the operation that
// uses it still goes through os.Root, so a link swapped in afterwards
// cannot lead outside.
func (w *Workspace) followLinks(p Path) (Path, error) {
	orig, abs := p.Abs, p.Abs
	for hops := 0; ; hops++ {
		if hops > maxLinks {
			return Path{}, &fs.PathError{Op: "open", Path: orig, Err: syscall.ELOOP}
		}
		cur, err := w.Resolve(abs, "")
		if err != nil {
			var de *DeniedError
			if hops == 0 || !errors.As(err, &de) {
				return Path{}, err
			}
			return Path{}, w.refuse(orig, fmt.Sprintf("Access to %s was denied: it leads through a symbolic link to %s, which %s", orig, abs, de.reason()))
		}
		next, ok, err := w.firstLink(cur)
		if err != nil {
			return Path{}, w.mapErr(cur, err)
		}
		if !ok {
			return cur, nil
		}
		abs = next
	}
}

// firstLink returns p with its first symbolic-link component replaced by
// the link's target, or false when p has no such component (up to the
// first missing one).
func (w *Workspace) firstLink(p Path) (string, bool, error) {
	if p.Rel == "." {
		return "", false, nil
	}
	segs := strings.Split(p.Rel, "/")
	for i := range segs {
		name := strings.Join(segs[:i+1], "/")
		fi, err := p.root.fs.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := p.root.fs.Readlink(name)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(p.root.path, filepath.Dir(name), target)
		}
		return filepath.Join(append([]string{target}, segs[i+1:]...)...), true, nil
	}
	return "", false, nil
}

// parentOf returns the Path of p's directory, which lies in the same root
// because p.Rel is not ".".
func (w *Workspace) parentOf(p Path) Path {
	rel := path.Dir(p.Rel)
	return Path{Abs: filepath.Dir(p.Abs), Root: p.Root, Rel: rel, Writable: p.Writable, root: p.root}
}

// check rejects Paths that did not come from Resolve.
func (w *Workspace) check(p Path) error {
	if p.root == nil || p.root.fs == nil {
		return fmt.Errorf("workspace: path %q was not resolved by this workspace, or the workspace is closed", p.Abs)
	}
	return nil
}

// mapErr turns os.Root's refusal into a *DeniedError and names the path
// the model used in other errors.
func (w *Workspace) mapErr(p Path, err error) error {
	if w.isEscape(err) {
		return w.refuse(p.Abs, fmt.Sprintf("Access to %s was denied: it leads outside the directories this session may use (%s) through a symbolic link or \"..\".", p.Abs, w.rootList()))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: p.Abs, Err: pe.Err}
	}
	return err
}

// isEscape reports whether err is os.Root refusing a path that leaves it.
func (w *Workspace) isEscape(err error) bool {
	return err != nil && w.escapeErr != nil && errors.Is(err, w.escapeErr)
}

// fdPath returns the path the kernel gives for f's descriptor, or "" when
// it cannot tell (no /proc, or the file was deleted).
func fdPath(f *os.File) string {
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var real string
	rc.Control(func(fd uintptr) {
		real, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd)))
	})
	if !filepath.IsAbs(real) || strings.HasSuffix(real, " (deleted)") {
		return ""
	}
	return real
}
