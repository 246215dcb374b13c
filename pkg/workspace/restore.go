package workspace

import (
	"errors"
	"io/fs"
	"syscall"
)

// RestoreFile puts back a file's earlier content and mode: as WriteFile,
// atomically and under the same checks, but with mode (permission bits,
// setuid, setgid and sticky) instead of the present file's.
func (w *Workspace) RestoreFile(p Path, data []byte, mode fs.FileMode) (fs.FileInfo, error) {
	return w.write(p, data, &mode)
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
