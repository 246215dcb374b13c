// Package workspace gives file tools traversal-safe access to a session's
// allowed roots. (Placeholder: being written.)
package workspace

// Workspace is the set of roots a session's file tools may reach.
type Workspace struct {
	dir string
}

// Dir returns the absolute path of the session's working directory.
func (w *Workspace) Dir() string { return w.dir }
