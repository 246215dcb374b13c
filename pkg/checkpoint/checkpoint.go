// Package checkpoint keeps a session's file checkpoints: before a file
// tool (Write, Edit, NotebookEdit) changes a file, the file's previous
// state (its bytes and mode, or that it did not exist) is recorded under
// the call's tool_use id, so that the workspace can later be put back to
// its state before that call. The checkpoints of a session are bounded in
// size: the oldest are dropped first, and the ids of the dropped ones are
// kept to say so.
//
// A store with a directory keeps the previous content there, with an
// index, so that a session opened again under the same id (a conversation
// resumed by a new orchestrator -p process) finds its checkpoints; the
// executor puts it in the session's output directory, which outlasts the
// session as long as the saved outputs do.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
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
	Path string `json:"path"`
	// Existed is false for a file the call created.
	Existed bool `json:"existed"`
	// Data and Mode are the previous bytes and mode (permission bits with
	// setuid, setgid and sticky), when it existed. Data is nil in a
	// store with a directory, which keeps it in Blob.
	Data []byte      `json:"-"`
	Mode fs.FileMode `json:"mode"`
	Size int64       `json:"size"`
	Blob string      `json:"blob,omitempty"`
}

// Checkpoint is what one call changed, as it was before.
type Checkpoint struct {
	ToolUseID string    `json:"tool_use_id"`
	ToolName  string    `json:"tool_name"`
	Time      time.Time `json:"time"`
	// Files are in the order the call first changed them.
	Files []File `json:"files"`
}

func (c *Checkpoint) size() int64 {
	var n int64
	for _, f := range c.Files {
		n += f.Size
	}
	return n
}

// index is the store's state as its directory keeps it.
type index struct {
	Checkpoints []*Checkpoint `json:"checkpoints"`
	Dropped     []string      `json:"dropped"`
	Next        int           `json:"next"`
}

const indexFile = "index.json"

// Store is one session's checkpoints. Its methods are safe for concurrent
// use.
type Store struct {
	max int64
	dir string // "" keeps everything in memory

	mu      sync.Mutex // guards the fields below
	list    []*Checkpoint
	bytes   int64
	dropped []string
	next    int   // number of the next blob
	err     error // the directory could not be written: memory only since
}

// New returns an empty store bounded to maxBytes of previous content
// (DefaultMaxBytes when zero or less), in memory.
func New(maxBytes int64) *Store {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{max: maxBytes}
}

// Open returns the store kept in dir, with the checkpoints it holds
// already. A directory that cannot be read or made gives a store in
// memory, and the error.
func Open(dir string, maxBytes int64) (*Store, error) {
	s := New(maxBytes)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, fmt.Errorf("checkpoints: %w", err)
	}
	s.dir = dir
	data, err := os.ReadFile(filepath.Join(dir, indexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	var ix index
	if err == nil {
		err = json.Unmarshal(data, &ix)
	}
	if err != nil {
		s.dir = ""
		return s, fmt.Errorf("checkpoints: %s: %w", dir, err)
	}
	s.list, s.dropped, s.next = ix.Checkpoints, ix.Dropped, ix.Next
	for _, c := range s.list {
		s.bytes += c.size()
	}
	return s, nil
}

type storeKey struct{}

// Dir is where a session's store keeps its checkpoints, in its output
// directory.
func Dir(outputDir string) string { return filepath.Join(outputDir, ".checkpoints") }

// Of returns the checkpoints of env's session, creating them (bounded by
// env.Limits.MaxCheckpointBytes) on first use: in the session's output
// directory when it has one, else in memory.
func Of(env *tool.Env) *Store {
	return env.Value(storeKey{}, func() any {
		if env.OutputDir == "" {
			return New(env.Limits.MaxCheckpointBytes)
		}
		s, _ := Open(Dir(env.OutputDir), env.Limits.MaxCheckpointBytes)
		return s
	}).(*Store)
}

// saveLocked writes the index; a failure leaves the store in memory from
// then on (the blobs written so far are read back as needed).
func (s *Store) saveLocked() {
	if s.dir == "" || s.err != nil {
		return
	}
	data, err := json.Marshal(index{Checkpoints: s.list, Dropped: s.dropped, Next: s.next})
	if err == nil {
		tmp := filepath.Join(s.dir, indexFile+".tmp")
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(s.dir, indexFile))
		}
	}
	s.err = err
}

// removeBlobsLocked deletes the blobs of c.
func (s *Store) removeBlobsLocked(c *Checkpoint) {
	for _, f := range c.Files {
		if f.Blob != "" && s.dir != "" {
			os.Remove(filepath.Join(s.dir, f.Blob))
		}
	}
}

// data returns f's previous bytes.
func (s *Store) data(f File) ([]byte, error) {
	if f.Blob == "" {
		return f.Data, nil
	}
	b, err := os.ReadFile(filepath.Join(s.dir, f.Blob))
	if err == nil && int64(len(b)) != f.Size {
		err = fmt.Errorf("%s holds %d bytes, not %d", f.Blob, len(b), f.Size)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint of %s: %w", f.Path, err)
	}
	return b, nil
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
	f.Size = int64(len(f.Data))
	if s.dir != "" && s.err == nil && f.Existed {
		name := strconv.Itoa(s.next) + ".prev"
		s.next++
		if err := os.WriteFile(filepath.Join(s.dir, name), f.Data, 0o600); err == nil {
			f.Blob, f.Data = name, nil
		} else {
			s.err = err
		}
	}
	if f.Blob == "" {
		f.Data = slices.Clone(f.Data)
	}
	c.Files = append(c.Files, f)
	s.bytes += f.Size
	var dropped []string
	for s.bytes > s.max && len(s.list) > 0 {
		first := s.list[0]
		s.list = s.list[1:]
		s.bytes -= first.size()
		s.removeBlobsLocked(first)
		s.dropped = append(s.dropped, first.ToolUseID)
		dropped = append(dropped, first.ToolUseID)
	}
	s.saveLocked()
	return dropped
}

// List returns the checkpoints, oldest first (their Data left out; Size
// says how much), the
// ids of the dropped ones, oldest first, and the bytes held and allowed.
func (s *Store) List() (cps []Checkpoint, dropped []string, bytes, maxBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.list {
		cp := *c
		cp.Files = make([]File, len(c.Files))
		for i, f := range c.Files {
			f.Data = nil
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
		if f.Existed {
			data, err := s.data(f)
			if err != nil {
				return nil, nil, err
			}
			f.Data, f.Blob = data, ""
		}
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
			s.removeBlobsLocked(c)
			return true
		}
		return false
	})
	s.saveLocked()
}
