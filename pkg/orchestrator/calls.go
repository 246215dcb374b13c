package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/execapi"
)

// call is one tool_use of a model response, as sent to the executor.
type call struct {
	use  execapi.ToolUse
	span trace.Span // execute_tool; ends with the call's result
}

// ctx is a context that carries only the call's span: what the link needs
// to send the call (again) with its trace context.
func (c *call) ctx() context.Context { return trace.ContextWithSpan(context.Background(), c.span) }

// callSet tracks the calls of one model response until each has a result.
type callSet struct {
	// ctx is the turn's: work done for a call on the orchestrator's side
	// (answering a WebFetch prompt) ends with it.
	ctx context.Context

	mu      sync.Mutex       // guards the fields below
	calls   map[string]*call // every call, by tool_use id
	pending map[string]bool  // the calls without a result
	claimed map[string]bool  // pending calls whose result is being completed here
	order   []string         // tool_use ids in the order of the response
	results []*execapi.CallResult
	signal  chan struct{} // receives a token when a result arrives
}

func newCallSet(ctx context.Context) *callSet {
	return &callSet{ctx: ctx, calls: map[string]*call{}, pending: map[string]bool{}, claimed: map[string]bool{}, signal: make(chan struct{}, 1)}
}

// get returns the call with id, nil when there is none.
func (c *callSet) get(id string) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// claim marks a pending call's result as being completed by the
// orchestrator (deliver still delivers it); false when the call has its
// result or another copy of it was claimed first.
func (c *callSet) claim(id string) (*call, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pending[id] || c.claimed[id] {
		return nil, false
	}
	c.claimed[id] = true
	return c.calls[id], true
}

// add records a call and its span, which ends with the call's result. A
// second call with the same id only ends its span.
func (c *callSet) add(use execapi.ToolUse, span trace.Span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.calls[use.ID]; dup {
		span.End()
		return
	}
	c.calls[use.ID] = &call{use: use, span: span}
	c.pending[use.ID] = true
	c.order = append(c.order, use.ID)
}

// unfinished returns the calls still waiting for a result, in tool_use
// order.
func (c *callSet) unfinished() []*call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*call
	for _, id := range c.order {
		if c.pending[id] {
			out = append(out, c.calls[id])
		}
	}
	return out
}

func (c *callSet) has(id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[id]
}

// deliver records r if its call waits for it, and reports whether it did.
// announce (publishResult) runs before the turn waiting for the calls can
// see r: the tool_result event is out before the turn goes on and
// publishes what follows it (the next request's events, turn_complete).
func (c *callSet) deliver(r *execapi.CallResult, announce func(*execapi.CallResult)) bool {
	c.mu.Lock()
	if !c.pending[r.ToolUseID] {
		c.mu.Unlock()
		return false
	}
	announce(r)
	delete(c.pending, r.ToolUseID)
	c.results = append(c.results, r)
	span := c.calls[r.ToolUseID].span
	c.mu.Unlock()
	endToolCall(span, r)
	select {
	case c.signal <- struct{}{}:
	default:
	}
	return true
}

func (c *callSet) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

func (c *callSet) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// arrived returns the results in the order they arrived.
func (c *callSet) arrived() []*execapi.CallResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*execapi.CallResult(nil), c.results...)
}

// waitAll waits until every call has its result. It returns early when ctx
// ends or the link's stream breaks (broken closes).
func (c *callSet) waitAll(ctx context.Context, broken <-chan struct{}) error {
	for c.waiting() > 0 {
		select {
		case <-c.signal:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-broken:
			if c.waiting() > 0 {
				return errLinkLost
			}
		}
	}
	return nil
}

var errLinkLost = errors.New("executor stream lost")

// waitResuming waits until every call has its result, resuming l when its
// stream breaks: the executor kept running the calls, so it reattaches
// within window, takes the events missed meanwhile, and sends again the
// calls still without a result (their copies that did arrive run once).
// Calls the orchestrator runs itself are not sent. It returns nil, ctx's
// cause, or an error wrapping errLinkLost when the session could not be
// resumed.
func (c *callSet) waitResuming(ctx context.Context, l execapi.Link, window time.Duration) error {
	for {
		err := c.waitAll(ctx, l.Broken())
		if !errors.Is(err, errLinkLost) {
			return err
		}
		if rerr := l.Resume(ctx, window); rerr != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("%w: %w", errLinkLost, rerr)
		}
		for _, uc := range c.unfinished() {
			if isLocal(uc.use.Name) {
				continue // the orchestrator runs it
			}
			if serr := l.Submit(uc.ctx(), uc.use); serr != nil {
				break // the stream broke again: the loop resumes it
			}
		}
	}
}
