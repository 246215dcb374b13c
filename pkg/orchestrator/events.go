package orchestrator

import (
	"context"
	"sync"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/tasklist"
	"github.com/toolwire/toolwire/pkg/tool"
)

// EventKind names a session event.
type EventKind int

// Session event kinds.
const (
	// EventText: assistant text streamed (MessageID, Text).
	EventText EventKind = iota + 1
	// EventToolUse: a complete tool_use block was sent to the executor
	// (MessageID, ToolUse).
	EventToolUse
	// EventToolStarted: a call began to run on the executor (Started).
	EventToolStarted
	// EventProgress: output of a running call (Progress).
	EventProgress
	// EventToolResult: the result of a call (Result).
	EventToolResult
	// EventPermissionRequest: a call waits for the client (Permission).
	EventPermissionRequest
	// EventMessage: a message was added to the transcript (Message,
	// MessageID for assistant messages).
	EventMessage
	// EventTaskNotification: a background task finished (Notification).
	EventTaskNotification
	// EventRetry: a model request is retried (Retry).
	EventRetry
	// EventError: something failed (Error); the turn may go on.
	EventError
	// EventTurnComplete: the turn ended (Turn).
	EventTurnComplete
	// EventMCPToolsChanged: the session's MCP servers or tools changed
	// (MCPToolsChanged); the next model request offers the new tools.
	EventMCPToolsChanged
	// EventBackgroundAck: the executor answered a Background
	// (BackgroundAck).
	EventBackgroundAck
	// EventTasks: the task list changed (Tasks).
	EventTasks
)

// ToolUse is a tool_use block as the model produced it.
type ToolUse struct {
	// ID is the tool_use id.
	ID string
	// Name is the tool name.
	Name string
	// InputJSON is the input text exactly as the model wrote it.
	InputJSON string
}

// ErrorInfo describes a failure reported to clients.
type ErrorInfo struct {
	// Kind is short and machine-readable: "api_error", "stream_cut",
	// "executor_unavailable", "max_turns", "persistence".
	Kind string
	// Message is for people.
	Message string
	// Recoverable is true when the turn goes on.
	Recoverable bool
	// Err is the failure itself, for an edge to classify (its reason).
	Err error
}

// Event is one thing that happened in a session. Seq increases by one per
// event of the session.
type Event struct {
	// Seq is the event's sequence number in its session.
	Seq uint64
	// Kind says which of the fields below are set.
	Kind EventKind
	// MessageID is the assistant message's id ("msg_..."), where known.
	MessageID string
	// ParentToolUseID is set on the events of a subagent (its messages,
	// calls and results): the id of the Agent call that runs it.
	ParentToolUseID string
	// Text is a piece of assistant text (EventText).
	Text string
	// ToolUse is a complete tool_use block (EventToolUse).
	ToolUse *ToolUse
	// Started reports a call that began to run (EventToolStarted).
	Started *execapi.Started
	// Progress is output of a running call (EventProgress).
	Progress *execapi.Progress
	// Result is a call's result (EventToolResult).
	Result *execapi.CallResult
	// Permission is a request for the client's decision
	// (EventPermissionRequest).
	Permission *execapi.PermissionRequest
	// Message was added to the transcript (EventMessage).
	Message *model.Message
	// Notification reports a finished background task
	// (EventTaskNotification).
	Notification *tool.TaskNotice
	// Retry describes a retried model request (EventRetry).
	Retry *model.Retry
	// Error describes a failure (EventError).
	Error *ErrorInfo
	// Turn sums up the finished turn (EventTurnComplete).
	Turn *TurnResult
	// MCPToolsChanged is the executor's new list of MCP servers and tools
	// (EventMCPToolsChanged).
	MCPToolsChanged *execapi.MCPToolsChanged
	// BackgroundAck answers a Background (EventBackgroundAck).
	BackgroundAck *execapi.BackgroundAck

	// execSeq is the executor event this one came from, if any: a shared
	// store records it with the event.
	execSeq uint64
	// blocks, on an EventToolUse of the conversation's own response with a
	// shared store, are the response's blocks completed since its call
	// before this one, this call's tool_use block last: a store records
	// them so that a replica taking over a turn whose replica stopped
	// mid-response can record the response up to its last call.
	blocks []model.Block
	// Tasks is the whole task list after a change (EventTasks).
	Tasks []tasklist.Task
}

// eventLog holds a session's recent events for any number of readers. The
// producer never blocks: a reader that falls more than the backlog behind
// skips what it missed.
type eventLog struct {
	backlog int

	mu      sync.Mutex    // guards the fields below
	events  []Event       // grows up to backlog, then is used as a ring
	start   int           // index of the oldest event
	count   int           // events held
	next    uint64        // sequence number of the next event
	changed chan struct{} // closed and replaced on every append
	closed  bool          // no more events will come

	// persist, when set (a shared store), stores each event before anyone
	// sees it; an event it fails to store is dropped and failed is told.
	persist func(Event) error
	failed  func(error)
}

func newEventLog(backlog int) *eventLog {
	return &eventLog{backlog: backlog, next: 1, changed: make(chan struct{})}
}

// publish assigns ev its sequence number and appends it.
func (l *eventLog) publish(ev Event) Event {
	l.mu.Lock()
	ev.Seq = l.next
	if l.persist != nil {
		if err := l.persist(ev); err != nil {
			l.mu.Unlock()
			l.failed(err)
			return ev
		}
	}
	l.next++
	switch {
	case len(l.events) < l.backlog:
		l.events = append(l.events, ev)
		l.count++
	default:
		l.events[l.start] = ev
		l.start = (l.start + 1) % len(l.events)
	}
	if !l.closed {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	l.mu.Unlock()
	return ev
}

// close tells readers that no more events will come.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.changed)
	}
}

// restart numbers the next event after last (the newest a shared store
// holds) and forgets the events held.
func (l *eventLog) restart(last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = last + 1
	l.events, l.start, l.count = nil, 0, 0
}

// last returns the sequence number of the newest event (0 if none).
func (l *eventLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// Subscription reads a session's events in order.
type Subscription struct {
	log   *eventLog
	after uint64
	// shared, when set, reads the events from a shared store instead of
	// the log, whose changes only wake it.
	shared *storedEvents
}

// Next returns the next event, waiting for one until ctx ends. Events
// already held are returned even when ctx has ended. After the session
// closed and every held event was read, Next returns ErrClosed.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	if s.shared != nil {
		return s.nextStored(ctx)
	}
	for {
		s.log.mu.Lock()
		l := s.log
		if s.after+1 < l.next {
			oldest := l.next - uint64(l.count)
			want := s.after + 1
			if want < oldest {
				want = oldest // fell behind: skip to the oldest held
			}
			ev := l.events[(l.start+int(want-oldest))%len(l.events)]
			s.after = ev.Seq
			l.mu.Unlock()
			return ev, nil
		}
		changed, closed := l.changed, l.closed
		l.mu.Unlock()
		if closed {
			return Event{}, ErrClosed
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-changed:
		}
	}
}
