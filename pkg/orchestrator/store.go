package orchestrator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/model"
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

// StoreOptions tunes a Store.
type StoreOptions struct {
	// Sync makes every append wait for the disk (fsync). Without it an
	// append survives a crash of the process but not of the machine.
	Sync bool
}

// OpenStore returns a Store in dir, creating the directory if needed.
func OpenStore(dir string, opts StoreOptions) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty session directory", ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	return &Store{dir: dir, sync: opts.Sync, files: map[string]*os.File{}}, nil
}

// DefaultStoreDir returns $XDG_STATE_HOME/toolwire/sessions, or
// ~/.local/state/toolwire/sessions when XDG_STATE_HOME is unset.
func DefaultStoreDir() (string, error) {
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

// checkID rejects ids that are not safe file names.
func checkID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("%w: session id %q (use letters, digits, '.', '_' and '-', at most 128)", ErrInvalid, id)
	}
	return nil
}

func (st *Store) path(id string) string { return filepath.Join(st.dir, id+".jsonl") }

// Record kinds of a transcript file.
const (
	recSession = "session"
	recMessage = "message"
	recTurn    = "turn"
	recPlaced  = "placed" // the session moved to another executor of its pool
	recConfig  = "config" // the session's configuration changed (Reconfigure)
)

// record is one line of a transcript file.
type record struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// Session header; Config also in a config record.
	ID     string         `json:"id,omitempty"`
	Config *SessionConfig `json:"config,omitempty"`
	// Message.
	Message   *model.Message `json:"message,omitempty"`
	MessageID string         `json:"message_id,omitempty"`
	// Turn.
	Turn *turnRecord `json:"turn,omitempty"`
	// Placed: the executor the session runs on from now on.
	Executor string `json:"executor,omitempty"`
}

type turnRecord struct {
	StopReason StopReason  `json:"stop_reason"`
	Usage      model.Usage `json:"usage"`
	Requests   int         `json:"requests"`
}

// create starts the transcript of a new session.
func (st *Store) create(id string, cfg SessionConfig, created time.Time) error {
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
	return st.append(id, record{Type: recSession, Time: created, ID: id, Config: &cfg})
}

// append writes one record.
func (st *Store) append(id string, rec record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", rec.Type, err)
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

// transcript is a loaded session file.
type transcript struct {
	id       string
	created  time.Time
	config   SessionConfig
	messages []model.Message
	turns    int
	usage    model.Usage
}

// load reads a session's transcript. Consecutive messages of the same role
// (written separately, e.g. results and then the next user text) are
// joined, as they were in the conversation. A torn last line is removed
// from the file.
func (st *Store) load(id string) (*transcript, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f, err := os.OpenFile(st.path(id), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("open transcript: %w", err)
	}
	defer f.Close()
	t := &transcript{id: id}
	r := bufio.NewReader(f)
	var good int64 // bytes of complete, valid records
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(line)) > 0 {
				// A record cut short by a crash: drop it so appends stay valid.
				if terr := f.Truncate(good); terr != nil {
					return nil, fmt.Errorf("cut torn record off %s: %w", f.Name(), terr)
				}
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read transcript %s: %w", f.Name(), err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			good += int64(len(line))
			continue
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("transcript %s line %d: %w", f.Name(), n, err)
		}
		good += int64(len(line))
		switch rec.Type {
		case recSession:
			t.created = rec.Time
			if rec.Config != nil {
				t.config = *rec.Config
			}
		case recMessage:
			if rec.Message != nil && len(rec.Message.Content) > 0 {
				t.messages = appendMessage(t.messages, *rec.Message)
			}
		case recPlaced:
			t.config.Executor = rec.Executor
		case recConfig:
			if rec.Config != nil {
				t.config = *rec.Config
			}
		case recTurn:
			t.turns++
			if rec.Turn != nil {
				t.usage = t.usage.Add(rec.Turn.Usage)
			}
		}
	}
	if t.created.IsZero() {
		return nil, fmt.Errorf("transcript %s has no session header", f.Name())
	}
	return t, nil
}

// appendMessage adds m to msgs, joining it to the last message when both
// are user messages.
func appendMessage(msgs []model.Message, m model.Message) []model.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == m.Role && m.Role == model.RoleUser {
		last := msgs[n-1]
		last.Content = append(append([]model.Block(nil), last.Content...), m.Content...)
		msgs[n-1] = last
		return msgs
	}
	return append(msgs, m)
}

// list returns the ids of stored sessions.
func (st *Store) list() ([]string, error) {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if ok && e.Type().IsRegular() && checkID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Summary describes a stored session.
type Summary struct {
	// ID of the session.
	ID string
	// Directory is the client's directory (SessionConfig.Directory); empty
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
	ids, err := st.list()
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, id := range ids {
		t, err := st.load(id)
		if err != nil {
			continue
		}
		info, err := os.Stat(st.path(id))
		if err != nil {
			continue
		}
		sum := Summary{ID: id, Directory: t.config.Directory, Model: t.config.Model, Created: t.created,
			Updated: info.ModTime(), Turns: t.turns, Messages: len(t.messages)}
		if len(t.messages) > 0 {
			sum.Prompt = t.messages[0].Text()
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
	ids, err := st.list()
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
		var rec record
		if serr != nil || json.Unmarshal(line, &rec) != nil || rec.Type != recSession || rec.Config == nil || rec.Config.Directory != dir {
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
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := os.Stat(st.path(id)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return st.remove(id)
}

// release closes the session's open file.
func (st *Store) release(id string) {
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
	st.release(id)
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
