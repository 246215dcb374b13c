package spancontract

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/test/tracing/jaegertest"
)

// Service names, as OTEL_SERVICE_NAME gives them.
const (
	Orchestrator = "orchestrator"
	Toolsvc      = "toolsvc"
)

// Stages are the child spans every run_tool span has, whatever the tool.
var Stages = []string{"queue_wait", "validate", "permission"}

// Search finds the trace of a conversation's turns in Jaeger: the
// orchestrator's invoke_agent span tagged with the conversation (session)
// id.
func Search(sessionID string) jaegertest.Search {
	return jaegertest.Search{
		Service: Orchestrator,
		Tags:    map[string]string{"gen_ai.conversation.id": sessionID},
	}
}

// Complete reports what the trace still lacks before it holds a span for
// every part of the conversation: the turn, each model request, each tool
// call on both sides, and the Bash process. Spans arrive in batches and
// from two services, so a test polls until Complete returns nil and then
// runs Check.
func Complete(t *jaegertest.Trace) error {
	calls := Calls()
	want := map[string]int{
		"invoke_agent":  1,
		"chat " + Model: len(Requests),
		"process":       count(calls, "Bash"),
	}
	for _, stage := range Stages {
		want[stage] = len(calls)
	}
	for _, c := range calls {
		want["execute_tool "+c.Name]++
		want["run_tool "+c.Name]++
	}
	var missing []string
	for name, n := range want {
		if got := len(t.Find("", name)); got < n {
			missing = append(missing, fmt.Sprintf("%d of %d %q", got, n, name))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("trace %s has only %s", t.ID, strings.Join(missing, ", "))
	}
	return nil
}

func count(calls []Call, name string) int {
	n := 0
	for _, c := range calls {
		if c.Name == name {
			n++
		}
	}
	return n
}

// Check verifies the trace of one turn of the conversation against the
// contract and returns every violation found, joined; nil means the trace
// meets it.
func Check(t *jaegertest.Trace, sessionID string) error {
	c := &checker{t: t}
	turn := c.turn(sessionID)
	if turn == nil {
		return c.err()
	}
	c.chats(turn)
	for _, call := range Calls() {
		if exec := c.executeTool(turn, call); exec != nil {
			c.runTool(exec, call)
		}
	}
	return c.err()
}

// checker collects violations.
type checker struct {
	t    *jaegertest.Trace
	errs []error
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w\n%s", errors.Join(c.errs...), c.t)
}

// turn finds the one invoke_agent span of the session.
func (c *checker) turn(sessionID string) *jaegertest.Span {
	var turns []*jaegertest.Span
	for _, s := range c.t.Spans {
		if op, _ := s.Str("gen_ai.operation.name"); op == "invoke_agent" {
			turns = append(turns, s)
		}
	}
	if len(turns) != 1 {
		c.errorf("%d spans with gen_ai.operation.name=invoke_agent, want 1 (one turn)", len(turns))
		return nil
	}
	s := turns[0]
	c.service(s, Orchestrator)
	c.name(s, "invoke_agent")
	c.attr(s, "gen_ai.conversation.id", sessionID)
	return s
}

// chats checks exactly one chat span per model request (the Anthropic
// SDK's own spans, which would repeat gen_ai.operation.name=chat, are
// turned off), children of the turn, in request order.
func (c *checker) chats(turn *jaegertest.Span) {
	var chats []*jaegertest.Span
	for _, s := range c.t.Spans {
		if op, _ := s.Str("gen_ai.operation.name"); op == "chat" {
			chats = append(chats, s)
		}
	}
	if len(chats) != len(Requests) {
		c.errorf("%d chat spans, want %d (one per model request)", len(chats), len(Requests))
		return
	}
	for i, s := range chats { // in start order, as the trace is
		c.service(s, Orchestrator)
		c.name(s, "chat "+Model)
		c.parent(s, turn)
		c.attr(s, "gen_ai.provider.name", "anthropic")
		c.attr(s, "gen_ai.request.model", Model)
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
			if n, ok := s.Int(k); !ok || n <= 0 {
				c.errorf("%s: %s = %v, want a positive integer", s, k, s.Attrs[k])
			}
		}
		reasons, _ := s.Attrs["gen_ai.response.finish_reasons"].([]any)
		if !slices.Contains(reasons, any(Requests[i].StopReason)) {
			c.errorf("%s: gen_ai.response.finish_reasons = %v, want [%s] (request %d)", s, s.Attrs["gen_ai.response.finish_reasons"], Requests[i].StopReason, i)
		}
	}
}

// executeTool checks the orchestrator's span of one call and returns it.
func (c *checker) executeTool(turn *jaegertest.Span, call Call) *jaegertest.Span {
	s := c.byCallID(Orchestrator, "execute_tool", call)
	if s == nil {
		return nil
	}
	c.name(s, "execute_tool "+call.Name)
	c.parent(s, turn)
	c.attr(s, "gen_ai.tool.name", call.Name)
	errType, hasErr := s.Str("error.type")
	switch {
	case call.IsError && (!hasErr || errType == ""):
		c.errorf("%s: no error.type, but the call's result is is_error", s)
	case !call.IsError && hasErr:
		c.errorf("%s: error.type=%q, but the call succeeded", s, errType)
	}
	return s
}

// runTool checks toolsvc's span of one call, under the orchestrator's
// execute_tool span, and its stages.
func (c *checker) runTool(exec *jaegertest.Span, call Call) {
	s := c.byCallID(Toolsvc, "run_tool", call)
	if s == nil {
		return
	}
	c.name(s, "run_tool "+call.Name)
	c.parent(s, exec)
	c.attr(s, "gen_ai.tool.name", call.Name)
	if o, ok := s.Str("toolwire.outcome"); !ok || o == "" {
		c.errorf("%s: no toolwire.outcome", s)
	}
	children := c.t.Children(s)
	for _, stage := range Stages {
		if !slices.ContainsFunc(children, func(ch *jaegertest.Span) bool { return ch.Name == stage }) {
			c.errorf("%s: no %q child", s, stage)
		}
	}
	for _, ch := range children {
		if ch.Service() != Toolsvc {
			c.errorf("%s: child %s is not toolsvc's", s, ch)
		}
	}
	if call.Name != "Bash" {
		return
	}
	var procs []*jaegertest.Span
	for _, ch := range children {
		if ch.Name == "process" {
			procs = append(procs, ch)
		}
	}
	if len(procs) != 1 {
		c.errorf("%s: %d process children, want 1", s, len(procs))
		return
	}
	p := procs[0]
	if pid, ok := p.Int("process.pid"); !ok || pid <= 0 {
		c.errorf("%s: process.pid = %v, want a pid", p, p.Attrs["process.pid"])
	}
	if code, ok := p.Int("process.exit.code"); !ok || code != 0 {
		c.errorf("%s: process.exit.code = %v, want 0", p, p.Attrs["process.exit.code"])
	}
}

// byCallID returns the one span of service whose gen_ai.operation.name (for
// the orchestrator) or name prefix (for toolsvc) is op and whose
// gen_ai.tool.call.id is the call's.
func (c *checker) byCallID(service, op string, call Call) *jaegertest.Span {
	var found []*jaegertest.Span
	for _, s := range c.t.Spans {
		if id, _ := s.Str("gen_ai.tool.call.id"); id != call.ID || s.Service() != service {
			continue
		}
		if o, _ := s.Str("gen_ai.operation.name"); o == op || strings.HasPrefix(s.Name, op+" ") {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		c.errorf("%d %s spans of %s with gen_ai.tool.call.id=%s, want 1", len(found), op, service, call.ID)
		return nil
	}
	return found[0]
}

func (c *checker) service(s *jaegertest.Span, want string) {
	if s.Service() != want {
		c.errorf("%s: service.name %q, want %q", s, s.Service(), want)
	}
}

func (c *checker) name(s *jaegertest.Span, want string) {
	if s.Name != want {
		c.errorf("%s: name %q, want %q", s, s.Name, want)
	}
}

func (c *checker) parent(s, want *jaegertest.Span) {
	if s.ParentID != want.SpanID {
		got := "none"
		if p := c.t.Span(s.ParentID); p != nil {
			got = p.String()
		} else if s.ParentID != "" {
			got = s.ParentID + " (not in the trace)"
		}
		c.errorf("%s: parent is %s, want %q %s", s, got, want.Name, want.SpanID)
	}
}

func (c *checker) attr(s *jaegertest.Span, key, want string) {
	if got, ok := s.Str(key); !ok || got != want {
		c.errorf("%s: %s = %v, want %q", s, key, s.Attrs[key], want)
	}
}
