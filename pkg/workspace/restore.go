package workspace

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// RestoreFile puts back a file's earlier content and mode: as WriteFile,
// atomically and under the same checks, but with mode (permission bits,
// setuid, setgid and sticky) instead of the present file's.
func (w *Workspace) RestoreFile(p Path, data []byte, mode fs.FileMode) (fs.FileInfo, error) {
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
	uid, gid := -1, -1
	fi, err := dir.Lstat(base)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, w.mapErr(p, err)
	}
	if err != nil {
		fi, err = dir.Stat(".") // a new file belongs to its directory's owner
	} else if err := w.checkExisting(p, fi); err != nil {
		return nil, err
	}
	if err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	mode &= fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	return w.replace(p, dir, base, data, mode, uid, gid)
}

// Remove removes the file at p under the checks of a write. A file that
// is not there is no error; a directory is.
func (w *Workspace) Remove(p Path) error {
	p, err := w.ResolveWrite(p)
	if err != nil {
		return err
	}
	fi, err := p.root.fs.Lstat(p.Rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return w.mapErr(p, err)
	case fi.IsDir():
		return &fs.PathError{Op: "remove", Path: p.Abs, Err: syscall.EISDIR}
	}
	if err := p.root.fs.Remove(p.Rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return w.mapErr(p, err)
	}
	return nil
}
