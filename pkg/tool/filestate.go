package tool

import (
	"sync"
	"time"
)

// FileRead records one Read of a file by the model.
type FileRead struct {
	// Content is the file's whole content when it was read.
	Content string
	// ModTime is the file's modification time when it was read.
	ModTime time.Time
	// Offset and Limit are the range the model asked for (zero: whole file).
	Offset, Limit int
}

// FileState remembers, per absolute path, the last Read or write of each
// file in a session. Write and Edit use it to insist on a Read first and to
// refuse files changed since.
type FileState struct {
	mu    sync.Mutex // guards files
	files map[string]FileRead
}

// NewFileState returns an empty FileState.
func NewFileState() *FileState { return &FileState{files: make(map[string]FileRead)} }

// Get returns the record of path.
func (s *FileState) Get(path string) (FileRead, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.files[path]
	return r, ok
}

// Set records a Read or write of path.
func (s *FileState) Set(path string, r FileRead) {
	s.mu.Lock()
	s.files[path] = r
	s.mu.Unlock()
}

// Forget drops the record of path.
func (s *FileState) Forget(path string) {
	s.mu.Lock()
	delete(s.files, path)
	s.mu.Unlock()
}
