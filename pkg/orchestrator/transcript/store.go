// Package transcript keeps conversations as JSONL files, one per session:
// the records of a transcript (the session and its configuration, each
// message as soon as it is complete, each finished turn, a move to
// another executor, a new configuration), how they are read back (torn
// last lines cut off, older forms of the configuration still read), and
// the Store that lists, finds and removes them.
//
// It is the orchestrator's persistence and knows nothing of turns or
// executors beyond what a record says; pkg/orchestrator writes the records.
//
// Why one package of this size (about 800 lines): the record format, the
// reading of its older forms and the Store are one file format's reader and
// writer, tested against each other.
package transcript

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors of the Store.
var (
	// ErrNotFound: no transcript has that session id.
	ErrNotFound = errors.New("session not found")
	// ErrExists: a transcript with that session id exists already.
	ErrExists = errors.New("session already exists")
	// ErrInvalidID: a session id that is not a safe file name.
	ErrInvalidID = errors.New("invalid session id")
)

// Store keeps each session's transcript as a JSONL file, <dir>/<id>.jsonl:
// a header record, then one record per message as soon as the message is
// complete, and one per finished turn. Records are only ever appended, so a
// crash loses at most the record being written, and a torn last line is cut
// off on the next load.
type Store struct {
	dir  string
	sync bool

	mu    sync.Mutex // guards files
	files map[string]*os.File
}

// Options tunes a Store.
type Options struct {
	// Sync makes every append wait for the disk (fsync). Without it an
	// append survives a crash of the process but not of the machine.
	Sync bool
}

// Open returns a Store in dir, creating the directory if needed.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("empty session directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	return &Store{dir: dir, sync: opts.Sync, files: map[string]*os.File{}}, nil
}

// DefaultDir returns $XDG_STATE_HOME/toolwire/sessions, or
// ~/.local/state/toolwire/sessions when XDG_STATE_HOME is unset.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "toolwire", "sessions"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the session directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "toolwire", "sessions"), nil
}

// Dir returns the store's directory.
func (st *Store) Dir() string { return st.dir }

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckID rejects ids that are not safe file names.
func CheckID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("%w: %q (use letters, digits, '.', '_' and '-', at most 128)", ErrInvalidID, id)
	}
	return nil
}

func (st *Store) path(id string) string { return filepath.Join(st.dir, id+".jsonl") }

// Create starts the transcript of a new session. A session that has one
// already is ErrExists.
func (st *Store) Create(id string, cfg Config, created time.Time) error {
	f, err := os.OpenFile(st.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, id)
	}
	if err != nil {
		return fmt.Errorf("create transcript: %w", err)
	}
	st.mu.Lock()
	st.files[id] = f
	st.mu.Unlock()
	return st.Append(id, Record{Kind: KindSession, Time: created, ID: id, Config: &cfg})
}

// Append writes one record to a session's transcript, keeping its file
// open until Release.
func (st *Store) Append(id string, rec Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", rec.Kind, err)
	}
	line = append(line, '\n')
	st.mu.Lock()
	defer st.mu.Unlock()
	f := st.files[id]
	if f == nil {
		f, err = os.OpenFile(st.path(id), os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open transcript: %w", err)
		}
		st.files[id] = f
	}
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("append to transcript %s: %w", f.Name(), err)
	}
	if st.sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync transcript %s: %w", f.Name(), err)
		}
	}
	return nil
}

// IDs returns the ids of the stored sessions.
func (st *Store) IDs() ([]string, error) {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if ok && e.Type().IsRegular() && CheckID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Summary describes a stored session.
type Summary struct {
	// ID of the session.
	ID string
	// Directory is the client's directory (Config.Directory); empty
	// for sessions stored before it was recorded.
	Directory string
	// Model is the session's model.
	Model string
	// Created is when the session was created.
	Created time.Time
	// Updated is when its transcript last changed.
	Updated time.Time
	// Turns counts completed turns.
	Turns int
	// Messages is the transcript's length.
	Messages int
	// Prompt is the text of the first user message.
	Prompt string
}

// List describes every stored session, most recently updated first.
// Transcripts that cannot be read are skipped.
func (st *Store) List() ([]Summary, error) {
	ids, err := st.IDs()
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, id := range ids {
		t, err := st.Load(id)
		if err != nil {
			continue
		}
		info, err := os.Stat(st.path(id))
		if err != nil {
			continue
		}
		sum := Summary{ID: id, Directory: t.Config.Directory, Model: t.Config.Model, Created: t.Created,
			Updated: info.ModTime(), Turns: t.Turns, Messages: len(t.Messages)}
		if len(t.Messages) > 0 {
			sum.Prompt = t.Messages[0].Text()
		}
		out = append(out, sum)
	}
	slices.SortStableFunc(out, func(a, b Summary) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Latest returns the id of the most recently updated session whose
// Directory is dir, reading only each transcript's first line. It returns
// ErrNotFound when there is none.
func (st *Store) Latest(dir string) (string, error) {
	ids, err := st.IDs()
	if err != nil {
		return "", err
	}
	var best string
	var bestTime time.Time
	for _, id := range ids {
		f, err := os.Open(st.path(id))
		if err != nil {
			continue
		}
		line, _ := bufio.NewReader(f).ReadBytes('\n')
		info, serr := f.Stat()
		f.Close()
		var rec Record
		if serr != nil || json.Unmarshal(line, &rec) != nil || rec.Kind != KindSession || rec.Config == nil || rec.Config.Directory != dir {
			continue
		}
		if best == "" || info.ModTime().After(bestTime) {
			best, bestTime = id, info.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: no conversation in %s", ErrNotFound, dir)
	}
	return best, nil
}

// Remove deletes a stored session's transcript. A session that is not
// stored is ErrNotFound.
func (st *Store) Remove(id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	if _, err := os.Stat(st.path(id)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return st.remove(id)
}

// Release closes the session's open file, if any.
func (st *Store) Release(id string) {
	st.mu.Lock()
	if f := st.files[id]; f != nil {
		_ = f.Close()
		delete(st.files, id)
	}
	st.mu.Unlock()
}

// remove deletes a session's transcript, and the directory beside it,
// <dir>/<id>/, where the in-process executor keeps the session's saved
// outputs.
func (st *Store) remove(id string) error {
	st.Release(id)
	if err := os.Remove(st.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove transcript: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(st.dir, id)); err != nil {
		return fmt.Errorf("remove saved outputs: %w", err)
	}
	return nil
}

// Close closes every open transcript file.
func (st *Store) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	var errs []error
	for id, f := range st.files {
		errs = append(errs, f.Close())
		delete(st.files, id)
	}
	return errors.Join(errs...)
}
