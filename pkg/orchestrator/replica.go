package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Replicas: with a shared Store (Store.Shared) any number of Orchestrators
// serve the same sessions. Each turn runs under the session's lease, which
// its replica renews; the turn's events are stored before clients see them,
// so a client reads them on whichever replica it reaches; between turns no
// replica holds the session's executor stream. When a replica dies in the
// middle of a turn its lease expires, and another takes the turn over: it
// resumes the executor session after the last executor event stored (calls
// keep running, their events are replayed, none runs twice), records the
// response the dead replica was streaming up to the last call it had sent
// (recoverTurn), asks the model again if a request was under way, and
// finishes the turn.

// Defaults of replicas.
const (
	DefaultLeaseTTL = 10 * time.Second
	// pollInterval paces a client's reading of events stored by another
	// replica.
	pollInterval = 50 * time.Millisecond
	// storeTimeout bounds a store operation that has no caller's context.
	storeTimeout = 10 * time.Second
)

func newReplicaID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "replica-" + hex.EncodeToString(b[:])
}

// shared reports whether the orchestrator's store is shared with replicas.
func (o *Orchestrator) shared() bool { return o.cfg.Store != nil && o.cfg.Store.Shared() }

// Replica returns the name this orchestrator holds leases under.
func (o *Orchestrator) Replica() string { return o.cfg.Replica }

// sweep takes over, every third of the lease time, the turns whose replica
// stopped renewing their lease, until the orchestrator closes.
func (o *Orchestrator) sweep() {
	t := time.NewTicker(o.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-t.C:
		}
		ids, err := o.cfg.Store.Expired(o.ctx)
		if err != nil {
			if o.ctx.Err() == nil {
				o.log.Warn("look for expired leases", "err", err)
			}
			continue
		}
		for _, id := range ids {
			if o.runsTurn(id) {
				// Its renewals came late (a slow store): the turn renews
				// the lease still, and taking it over here would end it.
				o.log.Warn("the lease of a turn this replica runs expired before it was renewed", "session_id", id)
				continue
			}
			ok, err := o.cfg.Store.TakeOver(o.ctx, id, o.cfg.Replica, o.cfg.LeaseTTL)
			if err != nil {
				o.log.Warn("take over an expired lease", "session_id", id, "err", err)
				continue
			}
			if ok {
				o.takeOver(id)
			}
		}
	}
}

// runsTurn reports whether a turn of session id runs on this replica.
func (o *Orchestrator) runsTurn(id string) bool {
	o.mu.Lock()
	s := o.sessions[id]
	o.mu.Unlock()
	return s != nil && s.localBusy()
}

// listen hands the notes of other replicas (interrupts, permission
// decisions) to the turns they are for, if this replica runs them, until
// the orchestrator closes; ready is closed once it listens.
func (o *Orchestrator) listen(ready chan struct{}) {
	var once sync.Once
	for o.ctx.Err() == nil {
		err := o.cfg.Store.Listen(o.ctx, func() { once.Do(func() { close(ready) }) }, o.note)
		if o.ctx.Err() != nil {
			return
		}
		o.log.Warn("listening for notes of other replicas; listening again in a second", "err", err)
		select {
		case <-o.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// note applies a note to the turn it is for, if it runs here.
func (o *Orchestrator) note(n Note) {
	o.mu.Lock()
	s := o.sessions[n.SessionID]
	o.mu.Unlock()
	if s == nil || !s.localBusy() {
		return
	}
	switch {
	case n.Interrupt != nil:
		s.log.Info("interrupt from another replica", "reason", *n.Interrupt)
		s.Interrupt(*n.Interrupt)
	case n.Decision != nil:
		if err := s.Decide(*n.Decision); err != nil {
			s.log.Warn("permission decision from another replica", "err", err)
		}
	}
}

// notify sends n for the replica running the session's turn.
func (s *Session) notify(n Note) error {
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	n.SessionID = s.id
	return s.o.cfg.Store.Notify(ctx, n)
}

// takeOver continues the turn of session id, whose lease this replica has
// just taken over.
func (o *Orchestrator) takeOver(id string) {
	log := o.log.With("session_id", id)
	fail := func(err error) {
		log.Error("take over a turn", "err", err)
		_ = o.cfg.Store.EndLease(context.WithoutCancel(o.ctx), id, o.cfg.Replica)
	}
	s, err := o.Session(o.ctx, id)
	if err != nil {
		fail(err)
		return
	}
	turnCtx, err := s.begin(s.ctx, true)
	if err != nil {
		fail(err)
		return
	}
	s.mu.Lock()
	open := s.turnOpen
	s.mu.Unlock()
	if !open {
		// The replica died before the turn's first message was stored (or
		// after its end was): there is nothing to go on with, and the
		// client's message, never stored, must be sent again.
		log.Warn("an expired lease with no turn under way; freeing it")
		s.abandon()
		return
	}
	log.Warn("taking over a turn whose replica is gone", "replica", o.cfg.Replica)
	go func() {
		defer s.turns.Done()
		s.turn(turnCtx, "", true)
	}()
}

// reload brings a session up to date with the store: another replica may
// have run turns since. Unless forTurn (the turn starting here, which
// holds the lease, reloads), a session running a turn here is left alone.
func (s *Session) reload(ctx context.Context, forTurn bool) error {
	st := s.o.cfg.Store
	t, err := st.Load(ctx, s.id)
	if err != nil {
		return err
	}
	last, err := st.LastEvent(ctx, s.id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy && !forTurn {
		return nil
	}
	s.messages, s.nturns, s.usage = t.Messages, t.Turns, t.Usage
	s.turnOpen = t.Open
	s.executor = t.Config.Executor
	s.events.restart(last)
	return nil
}

// holdLease keeps renewing the session's lease until stop is called; when
// the lease is lost (another replica took it over after this one stalled
// past its expiry) the session is fenced and the turn stopped.
func (s *Session) holdLease(turnCtx context.Context, stopTurn context.CancelCauseFunc) (stop func()) {
	ttl := s.o.cfg.LeaseTTL
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(turnCtx), ttl/3)
			err := s.o.cfg.Store.Renew(ctx, s.id, s.o.cfg.Replica, ttl)
			cancel()
			if errors.Is(err, ErrLeaseLost) {
				s.fence(err)
				stopTurn(err)
				return
			}
			if err != nil {
				s.log.Warn("renew the turn's lease", "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// fence stops the session from writing to the store: another replica runs
// its turn now.
func (s *Session) fence(err error) {
	if s.fenced.CompareAndSwap(false, true) {
		s.log.Error("another replica runs this session's turn now; this one stops writing", "err", err)
	}
}

// persistEvent stores ev (a shared store); it runs under the event log's
// lock, so events are stored in order.
func (s *Session) persistEvent(ev Event) error {
	if s.fenced.Load() {
		return fmt.Errorf("session %s: %w", s.id, ErrLeaseLost)
	}
	data, err := EncodeEvent(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), storeTimeout)
	defer cancel()
	return s.o.cfg.Store.AddEvent(ctx, s.id, StoredEvent{Seq: ev.Seq, Data: data, ExecSeq: ev.execSeq})
}

// eventFailed handles an event the store refused: with another replica's
// event in its place, the session's turn is that replica's now.
func (s *Session) eventFailed(err error) {
	if errors.Is(err, ErrEventConflict) || errors.Is(err, ErrLeaseLost) {
		s.fence(err)
		s.mu.Lock()
		stop := s.stopTurn
		s.mu.Unlock()
		if stop != nil {
			stop(err)
		}
		return
	}
	s.log.Warn("store an event", "err", err)
}

// seen records the newest executor event handled, when it made no event
// of the session (which records it itself).
func (s *Session) seen(seq uint64) {
	if !s.shared || s.fenced.Load() || seq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), storeTimeout)
	defer cancel()
	b := Binding{Executor: s.executorAddr(), SessionID: s.id, Seq: seq}
	if err := s.o.cfg.Store.Bind(ctx, s.id, b); err != nil {
		s.log.Warn("record the executor's sequence", "err", err)
	}
}

// storedEvents reads a session's events from a shared store.
type storedEvents struct {
	store Store
	id    string
	buf   []Event
}

func (s *Subscription) nextStored(ctx context.Context) (Event, error) {
	r := s.shared
	for {
		if len(r.buf) > 0 {
			ev := r.buf[0]
			r.buf = r.buf[1:]
			s.after = ev.Seq
			return ev, nil
		}
		s.log.mu.Lock()
		changed, closed := s.log.changed, s.log.closed
		s.log.mu.Unlock()
		// Events already stored are read even when ctx has ended.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		stored, err := r.store.Events(qctx, r.id, s.after, 256)
		cancel()
		if err != nil {
			return Event{}, err
		}
		for _, se := range stored {
			ev, err := DecodeEvent(se.Data)
			if err != nil {
				return Event{}, fmt.Errorf("event %d of session %s: %w", se.Seq, r.id, err)
			}
			ev.Seq = se.Seq
			r.buf = append(r.buf, ev)
		}
		if len(r.buf) > 0 {
			continue
		}
		if closed {
			return Event{}, ErrClosed
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return Event{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// storedEvent is an Event as EncodeEvent writes it: the errors, which do
// not encode, as their text and class.
type storedEvent struct {
	Kind         EventKind                  `json:"kind"`
	MessageID    string                     `json:"message_id,omitempty"`
	Parent       string                     `json:"parent_tool_use_id,omitempty"`
	Blocks       []model.Block              `json:"blocks,omitempty"`
	Text         string                     `json:"text,omitempty"`
	ToolUse      *ToolUse                   `json:"tool_use,omitempty"`
	Started      *execapi.Started           `json:"started,omitempty"`
	Progress     *execapi.Progress          `json:"progress,omitempty"`
	Result       *execapi.CallResult        `json:"result,omitempty"`
	Permission   *execapi.PermissionRequest `json:"permission,omitempty"`
	Message      *model.Message             `json:"message,omitempty"`
	Notification *tool.TaskNotice           `json:"notification,omitempty"`
	Retry        *model.Retry               `json:"retry,omitempty"`
	Error        *storedError               `json:"error,omitempty"`
	Turn         *storedTurn                `json:"turn,omitempty"`
}

type storedError struct {
	Kind        string `json:"kind"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable,omitempty"`
	Class       string `json:"class,omitempty"`
}

type storedTurn struct {
	StopReason  StopReason    `json:"stop_reason"`
	Usage       model.Usage   `json:"usage"`
	Requests    int           `json:"requests"`
	Text        string        `json:"text,omitempty"`
	Duration    time.Duration `json:"duration"`
	APIDuration time.Duration `json:"api_duration"`
	Err         string        `json:"err,omitempty"`
	Class       string        `json:"class,omitempty"`
}

// errorClasses are the error classes an event's error keeps through a
// store, so that a client on another replica gets the same reason.
var errorClasses = map[string]error{
	"busy": ErrBusy, "invalid": ErrInvalid, "closed": ErrClosed, "executor_unavailable": ErrExecutorUnavailable,
	"not_found": ErrNotFound, "lease_lost": ErrLeaseLost,
}

func classOf(err error) string {
	for name, class := range errorClasses {
		if errors.Is(err, class) {
			return name
		}
	}
	return ""
}

func withClass(text, class string) error {
	if c := errorClasses[class]; c != nil {
		return fmt.Errorf("%w: %s", c, text)
	}
	return errors.New(text)
}

// EncodeEvent encodes ev for a store. Errors keep their text and class
// (ErrExecutorUnavailable, ErrClosed, ...), not their chain.
func EncodeEvent(ev Event) ([]byte, error) {
	se := storedEvent{Kind: ev.Kind, MessageID: ev.MessageID, Parent: ev.ParentToolUseID, Blocks: ev.blocks,
		Text: ev.Text, ToolUse: ev.ToolUse, Started: ev.Started, Progress: ev.Progress, Result: ev.Result,
		Permission: ev.Permission, Message: ev.Message, Notification: ev.Notification, Retry: ev.Retry}
	if e := ev.Error; e != nil {
		se.Error = &storedError{Kind: e.Kind, Message: e.Message, Recoverable: e.Recoverable, Class: classOf(e.Err)}
	}
	if t := ev.Turn; t != nil {
		se.Turn = &storedTurn{StopReason: t.StopReason, Usage: t.Usage, Requests: t.Requests, Text: t.Text,
			Duration: t.Duration, APIDuration: t.APIDuration}
		if t.Err != nil {
			se.Turn.Err, se.Turn.Class = t.Err.Error(), classOf(t.Err)
		}
	}
	return json.Marshal(se)
}

// DecodeEvent decodes what EncodeEvent wrote; Seq is the store's.
func DecodeEvent(data []byte) (Event, error) {
	var se storedEvent
	if err := json.Unmarshal(data, &se); err != nil {
		return Event{}, err
	}
	ev := Event{Kind: se.Kind, MessageID: se.MessageID, ParentToolUseID: se.Parent, blocks: se.Blocks,
		Text: se.Text, ToolUse: se.ToolUse, Started: se.Started, Progress: se.Progress, Result: se.Result,
		Permission: se.Permission, Message: se.Message, Notification: se.Notification, Retry: se.Retry}
	if e := se.Error; e != nil {
		ev.Error = &ErrorInfo{Kind: e.Kind, Message: e.Message, Recoverable: e.Recoverable, Err: withClass(e.Message, e.Class)}
	}
	if t := se.Turn; t != nil {
		ev.Turn = &TurnResult{StopReason: t.StopReason, Usage: t.Usage, Requests: t.Requests, Text: t.Text,
			Duration: t.Duration, APIDuration: t.APIDuration}
		if t.Err != "" {
			ev.Turn.Err = withClass(t.Err, t.Class)
		}
	}
	return ev, nil
}

// lease takes the session's lease for a turn (unless the sweep took it
// over already) and brings the session up to date with the store. A link
// to the executor from before is dropped: another replica may have moved
// the executor session on since, so the turn attaches after the newest
// executor event stored.
func (s *Session) lease(ctx context.Context, takenOver bool) error {
	st := s.o.cfg.Store
	if !takenOver {
		if err := st.Acquire(ctx, s.id, s.o.cfg.Replica, s.o.cfg.LeaseTTL); err != nil {
			return fmt.Errorf("session %s: %w", s.id, err)
		}
	}
	if err := s.reload(ctx, true); err != nil {
		_ = st.EndLease(context.WithoutCancel(ctx), s.id, s.o.cfg.Replica)
		return err
	}
	s.fenced.Store(false)
	s.linkMu.Lock()
	if s.link != nil {
		s.link.Detach()
		s.link = nil
	}
	s.linkMu.Unlock()
	if err := s.recoverTurn(ctx); err != nil {
		_ = st.EndLease(context.WithoutCancel(ctx), s.id, s.o.cfg.Replica)
		return err
	}
	if !takenOver {
		// Calls left without results by a turn nobody took over (its
		// replica lost the lease and the one that took it failed) get
		// interrupted results.
		if err := s.repair(); err != nil {
			_ = st.EndLease(context.WithoutCancel(ctx), s.id, s.o.cfg.Replica)
			return err
		}
	}
	return nil
}

// recoverTurn takes up what the stored events say of a turn a replica
// left open. It records the response that replica was streaming, up to the
// last call it made: the replica sent the calls to the executor the moment
// each was complete, where they run on, so the transcript must show them
// for their results to be had and sent back, as after a cut stream (the
// blocks are those the store recorded with the calls' events). And it
// keeps the results clients were already told of (announced), which the
// calls get instead of being run or answered again. Only the events since
// the transcript's last user message are read. The lease is held.
func (s *Session) recoverTurn(ctx context.Context) error {
	s.mu.Lock()
	open := s.turnOpen
	streaming := open && len(s.messages) > 0 && s.messages[len(s.messages)-1].Role == model.RoleUser
	s.announced = nil
	s.mu.Unlock()
	if !open {
		return nil
	}
	var calls []Event // the response's calls, newest first
	announced := map[string]*execapi.CallResult{}
	for to, done := s.events.last(), false; to > 0 && !done; {
		from := to - min(to, responsePage)
		stored, err := s.o.cfg.Store.Events(ctx, s.id, from, int(to-from))
		if err != nil {
			return err
		}
		for i := len(stored) - 1; i >= 0 && !done; i-- {
			ev, err := DecodeEvent(stored[i].Data)
			if err != nil {
				return fmt.Errorf("event %d of session %s: %w", stored[i].Seq, s.id, err)
			}
			switch {
			case ev.ParentToolUseID != "":
				// A subagent's: its conversation is not the session's.
			case ev.Kind == EventMessage && ev.Message != nil && ev.Message.Role == model.RoleUser:
				// The transcript holds what came before; results of
				// calls that ended while the model still wrote its
				// message may come before that message's event.
				done = true
			case ev.Kind == EventToolResult && ev.Result != nil:
				announced[ev.Result.ToolUseID] = ev.Result
			case streaming && ev.Kind == EventToolUse && len(ev.blocks) > 0 && (len(calls) == 0 || ev.MessageID == calls[0].MessageID):
				calls = append(calls, ev)
			}
		}
		to = from
	}
	s.mu.Lock()
	s.announced = announced
	s.mu.Unlock()
	if len(calls) == 0 {
		return nil
	}
	var blocks []model.Block
	for _, ev := range slices.Backward(calls) {
		blocks = append(blocks, ev.blocks...)
	}
	msg := (&model.Response{Content: blocks}).Message()
	s.log.Warn("the turn's replica stopped mid-response; recording the response up to its last call",
		"message_id", calls[0].MessageID, "calls", len(calls))
	return s.addMessage(msg, calls[0].MessageID)
}

// takeAnnounced returns the results recoverTurn found and forgets them.
func (s *Session) takeAnnounced() map[string]*execapi.CallResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.announced
	s.announced = nil
	return a
}

// responsePage is how many stored events recoverTurn reads at a time.
const responsePage = 256

// release ends the turn's lease: renewing stops, the executor stream is
// detached (the next turn may run on another replica), and the lease is
// freed, unless another replica has it now.
func (s *Session) releaseLease() {
	s.mu.Lock()
	end := s.endLease
	s.endLease = nil
	s.mu.Unlock()
	if end == nil {
		return
	}
	end()
	s.linkMu.Lock()
	if s.link != nil {
		s.link.Detach()
		s.link = nil
	}
	s.linkMu.Unlock()
	if s.fenced.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), storeTimeout)
	defer cancel()
	if err := s.o.cfg.Store.EndLease(ctx, s.id, s.o.cfg.Replica); err != nil {
		s.log.Warn("end the turn's lease", "err", err)
	}
}

// abandon ends a turn taken over that has nothing to do, writing nothing
// but the freed lease.
func (s *Session) abandon() {
	s.mu.Lock()
	s.busy = false
	if s.stopTurn != nil {
		s.stopTurn(nil)
		s.stopTurn = nil
	}
	s.mu.Unlock()
	s.releaseLease()
	s.turns.Done()
}

// handOver stops the running turn without ending it, for another replica
// to take over: the session writes nothing more and aborts nothing, and
// its lease expires at once. The orchestrator is shutting down.
func (s *Session) handOver() {
	s.mu.Lock()
	busy := s.busy && s.endLease != nil
	s.mu.Unlock()
	if !busy {
		return
	}
	s.fence(errors.New("this replica is shutting down"))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), storeTimeout)
	defer cancel()
	if err := s.o.cfg.Store.Renew(ctx, s.id, s.o.cfg.Replica, 0); err != nil {
		s.log.Warn("hand the turn over", "err", err)
		return
	}
	s.log.Info("turn handed over to another replica")
}
