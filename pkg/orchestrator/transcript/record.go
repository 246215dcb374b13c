package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/toolwire/toolwire/pkg/model"
)

// Kinds of records.
const (
	KindSession = "session" // the header: the session and its configuration
	KindMessage = "message" // a message of the conversation
	KindTurn    = "turn"    // a finished turn
	KindPlaced  = "placed"  // the session moved to another executor of its pool
	KindConfig  = "config"  // the session's configuration changed
	KindRewind  = "rewind"  // the conversation was cut back to its first Keep messages
	KindTasks   = "tasks"   // the conversation's task list after a change
)

// Record is one line of a transcript file.
type Record struct {
	Kind string    `json:"type"`
	Time time.Time `json:"time"`
	// ID is the session's, in the header.
	ID string `json:"id,omitempty"`
	// Config is the session's configuration, in the header and in a
	// config record.
	Config *Config `json:"config,omitempty"`
	// Message and, for an assistant message, its id.
	Message   *model.Message `json:"message,omitempty"`
	MessageID string         `json:"message_id,omitempty"`
	// Turn sums up a finished turn.
	Turn *Turn `json:"turn,omitempty"`
	// Executor is the one the session runs on from a placed record on.
	Executor string `json:"executor,omitempty"`
	// Keep is how many messages (consecutive user messages joined) a
	// rewind record keeps.
	Keep int `json:"keep,omitempty"`
	// Tasks is the whole task list, in a tasks record (the orchestrator's
	// encoding; the store keeps it as it is).
	Tasks json.RawMessage `json:"tasks,omitempty"`
}

// Turn is the record of a finished turn.
type Turn struct {
	StopReason string      `json:"stop_reason"`
	Usage      model.Usage `json:"usage"`
	Requests   int         `json:"requests"`
}

// Transcript is a loaded session file.
type Transcript struct {
	ID      string
	Created time.Time
	// Config is the latest configuration, with the executor of the latest
	// placed record.
	Config   Config
	Messages []model.Message
	// Turns counts the finished turns; Usage sums their tokens.
	Turns int
	Usage model.Usage
	// Open is true when messages follow the last finished turn: a turn
	// began and has no record of its end.
	Open bool
	// Tasks is the task list of the latest tasks record, if any.
	Tasks json.RawMessage
}

// Load reads a session's transcript. Consecutive user messages (written
// separately, e.g. results and then the next user text) are joined, as
// they were in the conversation. A torn last line is removed from the
// file.
func (st *Store) Load(id string) (*Transcript, error) {
	if err := CheckID(id); err != nil {
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
	t := &Transcript{ID: id}
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
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("transcript %s line %d: %w", f.Name(), n, err)
		}
		good += int64(len(line))
		t.Add(rec)
	}
	if t.Created.IsZero() {
		return nil, fmt.Errorf("transcript %s has no session header", f.Name())
	}
	return t, nil
}

// Add folds one record into the transcript, as Load does for each line:
// the header sets the creation time and configuration, a message is
// appended (joined to a preceding user message), a placed record moves
// the session, a config record replaces the configuration, and a turn
// record counts a turn and its usage.
func (t *Transcript) Add(rec Record) {
	switch rec.Kind {
	case KindSession:
		t.Created = rec.Time
		if rec.Config != nil {
			t.Config = *rec.Config
		}
	case KindMessage:
		if rec.Message != nil && len(rec.Message.Content) > 0 {
			t.Messages = AppendMessage(t.Messages, *rec.Message)
			t.Open = true
		}
	case KindPlaced:
		t.Config.Executor = rec.Executor
	case KindRewind:
		if rec.Keep < len(t.Messages) {
			t.Messages = t.Messages[:rec.Keep]
		}
	case KindConfig:
		if rec.Config != nil {
			t.Config = *rec.Config
		}
	case KindTasks:
		t.Tasks = rec.Tasks
	case KindTurn:
		t.Open = false
		t.Turns++
		if rec.Turn != nil {
			t.Usage = t.Usage.Add(rec.Turn.Usage)
		}
	}
}

// AppendMessage adds m to msgs, joining it to the last message when both
// are user messages. It never writes into msgs below its length, so that
// whoever holds msgs (a request in flight holds a session's) keeps what it
// held: a join makes a new list.
func AppendMessage(msgs []model.Message, m model.Message) []model.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == m.Role && m.Role == model.RoleUser {
		last := msgs[n-1]
		last.Content = append(append([]model.Block(nil), last.Content...), m.Content...)
		return append(slices.Clip(msgs[:n-1]), last)
	}
	return append(msgs, m)
}
