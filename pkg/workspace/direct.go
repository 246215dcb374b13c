package workspace

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The direct path opens a file with one openat2(2) from its root's
// descriptor, with the kernel keeping the lookup beneath the root and
// refusing every symbolic link on the way. os.Root reaches the same file by
// opening each directory of the path in turn (and does it twice, for the
// Stat and for the open); then reading /proc/self/fd tells where the file
// really is. When no link is involved, that place is known without asking:
// the root's real path joined with the relative one. So the direct path
// costs three system calls whatever the depth, where the walk costs four
// plus four per directory.
//
// Anything out of the ordinary (a symbolic link, a missing file, a kernel
// or seccomp profile without openat2, a device) sends the call down the
// walk, which knows how to follow links inside the roots and how to word
// each refusal.

// directResolve are the openat2 resolve flags of the direct path.
const directResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openRootDir opens dir as a descriptor for openat2, or returns nil when
// it cannot: the direct path is then never taken. The descriptor is used
// through RawConn.Control, which keeps it open while in use: a Close that
// races with an open can never leave openat2 a number since given to
// another file.
func openRootDir(dir string) (*os.File, syscall.RawConn) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), dir)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil
	}
	return f, rc
}

// openDirect opens the regular file or directory at p by the direct path.
// ok is false when the walk must decide instead; then f is nil.
func (w *Workspace) openDirect(p Path) (f *os.File, fi fs.FileInfo, ok bool, err error) {
	r := p.root
	if r.dirConn == nil || p.Rel == "." {
		return nil, nil, false, nil
	}
	fd := -1
	cerr := r.dirConn.Control(func(dirfd uintptr) {
		// A look before opening, so that a device is never opened. It
		// may pass through a link (the open below then refuses, and the
		// walk decides), and a file swapped in between is caught by the
		// check after the open, as on the walk.
		fd = openBeneath(int(dirfd), p.Rel, func(st *unix.Stat_t) bool {
			t := st.Mode & unix.S_IFMT
			return t == unix.S_IFREG || t == unix.S_IFDIR
		})
	})
	if cerr != nil || fd < 0 {
		return nil, nil, false, nil
	}
	f = os.NewFile(uintptr(fd), p.Abs)
	if fi, err = f.Stat(); err == nil {
		// No link was followed: the file's real path is the root's real
		// path joined with p.Rel. It differs from p.Abs when the root was
		// named through a link, or when p.Abs names a nested root through
		// an outer root's link. (A root moved after the workspace opened is
		// not seen here; the walk's /proc/self/fd read-back would see it.)
		err = w.checkOpened(p, fi, filepath.Join(cmp.Or(p.root.real, p.root.path), p.Rel))
	}
	if err != nil {
		f.Close()
		return nil, nil, true, err
	}
	return f, fi, true, nil
}

// openBeneath opens rel beneath dirfd for reading in one openat2 that
// refuses links, after a look (fstatat, not following links) that want
// must accept, so that a device is never opened; -1 when the look fails,
// want refuses or the open fails.
func openBeneath(dirfd int, rel string, want func(*unix.Stat_t) bool) int {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || !want(&st) {
		return -1
	}
	fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: directResolve,
	})
	if err != nil {
		return -1
	}
	return fd
}

// ReadSmall reads the regular file at p whole, when it holds at most limit
// bytes, with Open's checks, in the fewest system calls: fstatat, openat2,
// fstat, one read and close. It makes no os.File, whose creation costs two
// more (fcntl, and an epoll_ctl that fails for a regular file), and stops
// at a short read, which for a regular file is its end. ok is false when
// the direct path cannot decide (a link, a missing file, a directory, a
// file over limit or one that grew while read): Open then does.
func (w *Workspace) ReadSmall(p Path, limit int64) (data []byte, fi fs.FileInfo, ok bool, err error) {
	if err := w.check(p); err != nil {
		return nil, nil, true, err
	}
	r := p.root
	if r.dirConn == nil || p.Rel == "." {
		return nil, nil, false, nil
	}
	fd := -1
	cerr := r.dirConn.Control(func(dirfd uintptr) {
		fd = openBeneath(int(dirfd), p.Rel, func(st *unix.Stat_t) bool {
			return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size <= limit
		})
	})
	if cerr != nil || fd < 0 {
		return nil, nil, false, nil
	}
	defer unix.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return nil, nil, false, nil
	}
	fi = &statInfo{name: filepath.Base(p.Abs), st: st}
	if err := w.checkOpened(p, fi, filepath.Join(cmp.Or(p.root.real, p.root.path), p.Rel)); err != nil {
		return nil, nil, true, err
	}
	if !fi.Mode().IsRegular() || st.Size > limit {
		return nil, nil, false, nil
	}
	buf := make([]byte, st.Size+1) // a byte to spare: a short read is the end
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, true, &fs.PathError{Op: "read", Path: p.Abs, Err: err}
		}
		if k == 0 {
			break
		}
		n += k
		if n < len(buf) {
			break
		}
	}
	if n == len(buf) { // it grew meanwhile
		return nil, nil, false, nil
	}
	return buf[:n], fi, true, nil
}

// statInfo is the fs.FileInfo of a stat(2) result.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (s *statInfo) Name() string { return s.name }
func (s *statInfo) Size() int64  { return s.st.Size }
func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	}
	if s.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }
