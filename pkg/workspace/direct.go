package workspace

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

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
		var st unix.Stat_t
		if unix.Fstatat(int(dirfd), p.Rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
			return
		}
		fd, _ = unix.Openat2(int(dirfd), p.Rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
			Resolve: directResolve,
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
