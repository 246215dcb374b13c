package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// ErrRewind: the files could not be restored, so the conversation was not
// cut.
var ErrRewind = errors.New("rewind failed")

// RewindResult says what Rewind did.
type RewindResult struct {
	// Restore is the executor's answer; nil when no call from the rewind
	// point on changed a file.
	Restore *execapi.RestoreResult
	// MessagesRemoved counts the messages cut from the conversation.
	MessagesRemoved int
}

// Rewind goes back to before the assistant message that holds toolUseID:
// the files the session's file tools changed from that message on are
// restored through the executor's checkpoints, then the conversation is
// cut to the messages before it (recorded in the transcript), so that the
// next turn starts from there. When the files cannot all be restored
// (a checkpoint was dropped, a deny rule refuses a file) the conversation
// is left whole and the error (ErrRewind) says why; what was restored
// stays restored. A session running a turn is refused with ErrBusy.
func (s *Session) Rewind(ctx context.Context, toolUseID string) (*RewindResult, error) {
	s.mu.Lock()
	if err := s.claimLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	cut, ids := rewindPoint(s.messages, toolUseID)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}()
	if cut < 0 {
		return nil, fmt.Errorf("%w: session %s has no assistant message with tool_use %q", ErrInvalid, s.id, toolUseID)
	}
	l, _, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	res := &RewindResult{}
	ev, err := s.askExecutor(ctx, l, func(id string) error { return l.ListCheckpoints(execapi.ListCheckpoints{RequestID: id}) })
	if err != nil {
		return nil, err
	}
	list := ev.CheckpointList
	first := ""
	for _, id := range ids {
		if slices.Contains(list.Dropped, id) {
			return nil, fmt.Errorf("%w: the executor dropped the checkpoint of %s to keep within its size bound, so the files cannot be put back", ErrRewind, id)
		}
		if first == "" && slices.ContainsFunc(list.Checkpoints, func(c execapi.Checkpoint) bool { return c.ToolUseID == id }) {
			first = id
		}
	}
	if first != "" {
		ev, err := s.askExecutor(ctx, l, func(id string) error {
			return l.RestoreCheckpoint(execapi.RestoreCheckpoint{RequestID: id, ToolUseID: first})
		})
		if err != nil {
			return nil, err
		}
		res.Restore = ev.RestoreResult
		if msg := restoreFailure(res.Restore); msg != "" {
			return res, fmt.Errorf("%w: %s", ErrRewind, msg)
		}
	}
	s.mu.Lock()
	res.MessagesRemoved = len(s.messages) - cut
	s.cutLocked(cut)
	s.mu.Unlock()
	if st := s.o.cfg.Store; st != nil {
		if err := st.Append(ctx, s.id, transcript.Record{Kind: transcript.KindRewind, Time: time.Now(), Keep: cut}); err != nil {
			return res, fmt.Errorf("persist the rewind: %w", err)
		}
	}
	s.log.Info("rewound", "tool_use_id", toolUseID, "messages_removed", res.MessagesRemoved, "restored_from", first)
	return res, nil
}

// rewindPoint returns the index of the assistant message holding
// toolUseID (-1 when none does) and the tool_use ids of that message and
// every later one, in order.
func rewindPoint(msgs []model.Message, toolUseID string) (int, []string) {
	cut := slices.IndexFunc(msgs, func(m model.Message) bool {
		return m.Role == model.RoleAssistant && slices.ContainsFunc(m.Content, func(b model.Block) bool {
			return b.Type == model.BlockToolUse && b.ID == toolUseID
		})
	})
	if cut < 0 {
		return -1, nil
	}
	var ids []string
	for _, m := range msgs[cut:] {
		for _, b := range m.Content {
			if m.Role == model.RoleAssistant && b.Type == model.BlockToolUse {
				ids = append(ids, b.ID)
			}
		}
	}
	return cut, ids
}

// restoreFailure describes what a restore did not do; "" when it did all.
func restoreFailure(r *execapi.RestoreResult) string {
	if r.Error != "" {
		return r.Error
	}
	var failed []string
	for _, f := range r.Files {
		if f.Action == execapi.RestoreFailed {
			failed = append(failed, f.Path+": "+f.Error)
		}
	}
	return strings.Join(failed, "; ")
}

// askExecutor sends a request to the executor with a new request id and waits
// for the event that answers it.
func (s *Session) askExecutor(ctx context.Context, l execapi.Link, send func(id string) error) (execapi.Event, error) {
	s.mu.Lock()
	s.requests++
	id := "orch-" + strconv.Itoa(s.requests)
	if s.answers == nil {
		s.answers = map[string]chan execapi.Event{}
	}
	ch := make(chan execapi.Event, 1)
	s.answers[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.answers, id)
		s.mu.Unlock()
	}()
	if err := send(id); err != nil {
		return execapi.Event{}, fmt.Errorf("session %s: %w: %w", s.id, ErrExecutorUnavailable, err)
	}
	select {
	case ev := <-ch:
		return ev, nil
	case <-l.Broken():
		return execapi.Event{}, fmt.Errorf("session %s: %w: the stream broke before the executor answered", s.id, ErrExecutorUnavailable)
	case <-ctx.Done():
		return execapi.Event{}, ctx.Err()
	}
}

// answer hands an executor's answer to the request waiting for it.
func (s *Session) answer(id string, ev execapi.Event) {
	s.mu.Lock()
	ch := s.answers[id]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- ev:
		default:
		}
	}
}
