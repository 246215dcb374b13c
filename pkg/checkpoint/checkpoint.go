// Package checkpoint keeps a session's file checkpoints: before a file
// tool (Write, Edit, NotebookEdit) changes a file, the file's previous
// state (its bytes and mode, or that it did not exist) is recorded under
// the call's tool_use id, so that the workspace can later be put back to
// its state before that call. The checkpoints of a session are bounded in
// size: the oldest are dropped first, and the ids of the dropped ones are
// kept to say so.
package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
)

// DefaultMaxBytes bounds the previous content a session's checkpoints
// hold, unless the executor is configured otherwise.
const DefaultMaxBytes = 64 << 20

// Errors of Plan.
var (
	// ErrNotFound: no checkpoint has that tool_use id.
	ErrNotFound = errors.New("no checkpoint for that tool_use")
	// ErrDropped: the checkpoint was dropped to keep within the size bound.
	ErrDropped = errors.New("the checkpoint was dropped to keep the session's checkpoints within their size bound")
)

// File is one file's state before a call.
type File struct {
	// Path is the absolute path written (symbolic links followed).
	Path string
	// Existed is false for a file the call created.
	Existed bool
	// Data and Mode are the previous bytes and mode (permission bits with
	// setuid, setgid and sticky), when it existed.
	Data []byte
	Mode fs.FileMode
}

// Checkpoint is what one call changed, as it was before.
type Checkpoint struct {
	ToolUseID string
	ToolName  string
	Time      time.Time
	// Files are in the order the call first changed them.
	Files []File
}

func (c *Checkpoint) size() int64 {
	var n int64
	for _, f := range c.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Store is one session's checkpoints. Its methods are safe for concurrent
// use.
type Store struct {
	max int64

	mu      sync.Mutex // guards the fields below
	list    []*Checkpoint
	bytes   int64
	dropped []string
}

// New returns an empty store bounded to maxBytes of previous content
// (DefaultMaxBytes when zero or less).
func New(maxBytes int64) *Store {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{max: maxBytes}
}

type storeKey struct{}

// Of returns the checkpoints of env's session, creating them (bounded by
// env.Limits.MaxCheckpointBytes) on first use.
func Of(env *tool.Env) *Store {
	return env.Value(storeKey{}, func() any { return New(env.Limits.MaxCheckpointBytes) }).(*Store)
}

// Record notes f's state before call toolUseID of tool changes it. A file
// the call changed already keeps its first state. Recording may drop the
// oldest checkpoints, the new one included when it alone is over the
// bound; it returns the ids of those it dropped.
func (s *Store) Record(toolUseID, toolName string, f File) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c *Checkpoint
	for _, x := range s.list {
		if x.ToolUseID == toolUseID {
			c = x
		}
	}
	if c == nil {
		if slices.Contains(s.dropped, toolUseID) {
			return nil // its earlier files are gone: a partial one would mislead
		}
		c = &Checkpoint{ToolUseID: toolUseID, ToolName: toolName, Time: time.Now()}
		s.list = append(s.list, c)
	}
	for _, old := range c.Files {
		if old.Path == f.Path {
			return nil
		}
	}
	f.Data = slices.Clone(f.Data)
	c.Files = append(c.Files, f)
	s.bytes += int64(len(f.Data))
	var dropped []string
	for s.bytes > s.max && len(s.list) > 0 {
		first := s.list[0]
		s.list = s.list[1:]
		s.bytes -= first.size()
		s.dropped = append(s.dropped, first.ToolUseID)
		dropped = append(dropped, first.ToolUseID)
	}
	return dropped
}

// List returns the checkpoints, oldest first (their Data left out), the
// ids of the dropped ones, oldest first, and the bytes held and allowed.
func (s *Store) List() (cps []Checkpoint, dropped []string, bytes, maxBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.list {
		cp := *c
		cp.Files = make([]File, len(c.Files))
		for i, f := range c.Files {
			f.Data = f.Data[:len(f.Data):len(f.Data)]
			cp.Files[i] = f
		}
		cps = append(cps, cp)
	}
	return cps, slices.Clone(s.dropped), s.bytes, s.max
}

// Plan returns what restoring to the state before toolUseID writes: for
// each file the calls from toolUseID on changed, its state before the
// first of them, in path order; and the ids of those calls, to Forget once
// restored.
func (s *Store) Plan(toolUseID string) ([]File, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := slices.IndexFunc(s.list, func(c *Checkpoint) bool { return c.ToolUseID == toolUseID })
	if at < 0 {
		if slices.Contains(s.dropped, toolUseID) {
			return nil, nil, fmt.Errorf("%s: %w", toolUseID, ErrDropped)
		}
		return nil, nil, fmt.Errorf("%s: %w", toolUseID, ErrNotFound)
	}
	first := map[string]File{}
	var ids []string
	for _, c := range s.list[at:] {
		ids = append(ids, c.ToolUseID)
		for _, f := range c.Files {
			if _, seen := first[f.Path]; !seen {
				first[f.Path] = f
			}
		}
	}
	files := make([]File, 0, len(first))
	for _, f := range first {
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, ids, nil
}

// Forget removes the checkpoints of ids (restored, so undone).
func (s *Store) Forget(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(s.list, func(c *Checkpoint) bool {
		if slices.Contains(ids, c.ToolUseID) {
			s.bytes -= c.size()
			return true
		}
		return false
	})
}
