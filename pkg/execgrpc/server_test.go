package execgrpc_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/tool"
)

func TestSafeCallsRunInParallelAndUnsafeIsABarrier(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("a", "m1", `{"gate":"a","safe":true}`)
	s.use("b", "m1", `{"gate":"b","safe":true}`)
	s.use("w", "m1", `{"gate":"w"}`)
	s.use("c", "m1", `{"safe":true}`)
	// a and b both start while neither has finished.
	for _, ev := range s.untilStarted("a", "b") {
		if id := ev.GetStarted().GetToolUseId(); id == "w" || id == "c" {
			t.Fatalf("%s started while safe calls ran", id)
		}
	}
	h.gates.release("a")
	h.gates.release("b")
	var rs []*executorv1.Result
	for _, ev := range s.until(startedEvent("w")) {
		if ev.GetStarted().GetToolUseId() == "c" {
			t.Fatal("c overtook the unsafe call w")
		}
		if r := ev.GetResult(); r != nil {
			rs = append(rs, r)
		}
	}
	h.gates.release("w")
	rs = append(rs, s.results(4-len(rs))...)
	if got := resultIDs(rs); !slices.Equal(got, []string{"a", "b", "w", "c"}) {
		t.Fatalf("result order %v", got)
	}
}

func TestAcceptedReportsConcurrencyVerdict(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("safe", "m1", `{"safe":true}`)
	s.use("unsafe", "m1", `{}`)
	s.use("bad", "m1", `{"safe":true,"nope":1}`)
	verdict := map[string]bool{}
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if a := ev.GetAccepted(); a != nil {
			verdict[a.GetToolUseId()] = a.GetConcurrencySafe()
		}
		return len(verdict) == 3
	})
	if !verdict["safe"] || verdict["unsafe"] || verdict["bad"] {
		t.Fatalf("verdicts %v: only the valid safe call is concurrency-safe", verdict)
	}
}

// With LIFECYCLE_FOLDED a call that ends while its Accepted and Started
// are held reaches the client as its Result alone, whose timing says when
// it was received and started; a call that reports progress first gets
// both, as every call does without the option. The hold is an hour, so
// only the calls' own events release what is held.
func TestLifecycleFolded(t *testing.T) {
	kinds := func(evs []*executorv1.ExecuteResponse) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, strings.TrimPrefix(fmt.Sprintf("%T", ev.GetEvent()), "*executorv1.ExecuteResponse_"))
		}
		return out
	}
	h := newHarness(t, executor.Config{Limits: tool.Limits{ProgressInterval: time.Hour}})
	for _, tc := range []struct {
		lifecycle  executorv1.Lifecycle
		quick, ran []string
	}{
		{executorv1.Lifecycle_LIFECYCLE_UNSPECIFIED, []string{"Accepted", "Started", "Result"}, []string{"Accepted", "Started", "Progress", "Result"}},
		{executorv1.Lifecycle_LIFECYCLE_EVERY_CALL, []string{"Accepted", "Started", "Result"}, []string{"Accepted", "Started", "Progress", "Result"}},
		{executorv1.Lifecycle_LIFECYCLE_FOLDED, []string{"Result"}, []string{"Accepted", "Started", "Progress", "Result"}},
	} {
		t.Run(tc.lifecycle.String(), func(t *testing.T) {
			s := h.open(&executorv1.SessionOptions{Lifecycle: tc.lifecycle})
			s.use("quick", "m1", `{}`)
			evs := s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetResult() != nil })
			if got := kinds(evs); !slices.Equal(got, tc.quick) {
				t.Fatalf("a quick call's events: %v, want %v", got, tc.quick)
			}
			r := evs[len(evs)-1].GetResult()
			if tm := r.GetTiming(); tm.GetReceivedAt() == nil || tm.GetStartedAt() == nil || tm.GetQueueWait() == nil {
				t.Fatalf("the Result's timing %v does not say when the call was received and started", tm)
			}
			gate := "ran-" + tc.lifecycle.String()
			s.use("ran", "m2", `{"output":"out","gate":"`+gate+`"}`)
			evs = s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetProgress() != nil })
			h.gates.release(gate)
			evs = append(evs, s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetResult() != nil })...)
			if got := kinds(evs); !slices.Equal(got, tc.ran) {
				t.Fatalf("a call with progress: events %v, want %v", got, tc.ran)
			}
		})
	}
}

func TestResultOrder(t *testing.T) {
	for _, tc := range []struct {
		order executorv1.ResultOrder
		want  []string
	}{
		{executorv1.ResultOrder_RESULT_ORDER_UNSPECIFIED, []string{"slow", "fast"}},
		{executorv1.ResultOrder_RESULT_ORDER_COMPLETION, []string{"fast", "slow"}},
	} {
		t.Run(tc.order.String(), func(t *testing.T) {
			h := newHarness(t, executor.Config{})
			s := h.open(&executorv1.SessionOptions{ResultOrder: tc.order})
			s.use("slow", "m1", `{"gate":"slow","safe":true}`)
			s.use("fast", "m1", `{"safe":true}`)
			// fast finishes first; let slow go only once fast has its result
			// or (tool_use order) once fast ran.
			s.until(startedEvent("fast"))
			h.gates.release("slow")
			if got := resultIDs(s.results(2)); !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSiblingAbort(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  executorv1.SiblingAbort
		stopped bool
	}{
		{"enabled by default", executorv1.SiblingAbort_SIBLING_ABORT_UNSPECIFIED, true},
		{"disabled", executorv1.SiblingAbort_SIBLING_ABORT_DISABLED, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, executor.Config{})
			s := h.open(&executorv1.SessionOptions{SiblingAbort: tc.policy, ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
			s.use("slow", "m1", `{"gate":"slow","safe":true}`)
			s.use("other", "m2", `{"gate":"other","safe":true}`)
			s.use("bad", "m1", `{"fail":true,"safe":true}`)
			rs := s.results(1)
			if rs[0].GetToolUseId() != "bad" || !rs[0].GetIsError() {
				t.Fatalf("first result %v", rs[0])
			}
			if !tc.stopped {
				h.gates.release("slow")
			}
			rs = s.results(1)
			slow := rs[0]
			if slow.GetToolUseId() != "slow" {
				t.Fatalf("got %v", slow)
			}
			if tc.stopped {
				if slow.GetOutcome() != executorv1.Outcome_OUTCOME_SIBLING_ERROR || !strings.Contains(text(slow), "<tool_use_error>") || !strings.Contains(text(slow), "bad") {
					t.Fatalf("slow sibling: %v", slow)
				}
			} else if slow.GetIsError() {
				t.Fatalf("slow sibling failed with sibling abort off: %v", slow)
			}
			// A call of another message is never a sibling.
			h.gates.release("other")
			if r := s.results(1)[0]; r.GetToolUseId() != "other" || r.GetIsError() {
				t.Fatalf("other message's call: %v", r)
			}
		})
	}
}

func TestAbort(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	// A call of the message that has finished is not stopped again.
	s.use("done", "m1", `{"safe":true}`)
	if r := s.results(1)[0]; r.GetToolUseId() != "done" || r.GetIsError() {
		t.Fatalf("first call: %v", r)
	}
	s.use("running", "m1", `{"gate":"never"}`)
	s.use("queued", "m1", `{"safe":true}`)
	s.use("other", "m2", `{"gate":"o","safe":true}`)
	s.until(startedEvent("running"))
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_AssistantMessageId{AssistantMessageId: "m1"}}}})
	var ack *executorv1.AbortAck
	var rs []*executorv1.Result
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if a := ev.GetAbortAck(); a != nil {
			if len(rs) > 0 {
				t.Fatal("a result came before the abort ack")
			}
			ack = a
		}
		if r := ev.GetResult(); r != nil {
			rs = append(rs, r)
		}
		return len(rs) == 2
	})
	if got := slices.Sorted(slices.Values(ack.GetToolUseIds())); !slices.Equal(got, []string{"queued", "running"}) {
		t.Fatalf("ack ids %v", got)
	}
	for _, r := range rs {
		if r.GetOutcome() != executorv1.Outcome_OUTCOME_INTERRUPTED || !r.GetIsError() || !strings.Contains(text(r), "Interrupted") {
			t.Fatalf("aborted result %v", r)
		}
	}
	if n := h.tool.runCount("queued"); n != 0 {
		t.Fatalf("queued call ran %d times after abort", n)
	}
	// Aborting unknown or finished calls is harmless.
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_ToolUseId{ToolUseId: "nope"}}}})
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_ToolUseId{ToolUseId: "running"}}}})
	h.gates.release("o")
	if r := s.results(1)[0]; r.GetToolUseId() != "other" || r.GetIsError() {
		t.Fatalf("call of another message was affected: %v", r)
	}
}

func TestAbortAll(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	for _, id := range []string{"a", "b", "c"} {
		s.use(id, "m"+id, `{"gate":"never","safe":true}`)
	}
	s.untilStarted("a", "b", "c")
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_All{All: true}, Reason: executorv1.AbortReason_ABORT_REASON_STREAMING_FALLBACK}}})
	for _, r := range s.results(3) {
		if r.GetOutcome() != executorv1.Outcome_OUTCOME_INTERRUPTED || !strings.Contains(text(r), "stream failed") {
			t.Fatalf("result %v", r)
		}
	}
}

func TestDuplicateToolUseRunsOnce(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("x", "m1", `{"output":"once"}`)
	first := s.results(1)[0]
	s.use("x", "m1", `{"output":"twice"}`)
	var dup bool
	var second *executorv1.Result
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if a := ev.GetAccepted(); a != nil {
			dup = a.GetDuplicate()
		}
		second = ev.GetResult()
		return second != nil
	})
	if !dup || text(second) != text(first) || !strings.Contains(text(first), "once") {
		t.Fatalf("duplicate: accepted dup=%v first=%q second=%q", dup, text(first), text(second))
	}
	if n := h.tool.runCount("x"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// A tool_use id repeated while its first call still runs waits for that
// call's Result and gets it again; nothing runs twice.
func TestDuplicateOfARunningCallRunsOnce(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(&executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
	s.use("x", "m1", `{"output":"once","gate":"x"}`)
	s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetStarted() != nil })
	s.use("x", "m2", `{"output":"twice"}`)
	s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetAccepted().GetDuplicate() })
	h.gates.release("x")
	results := s.results(2)
	for _, r := range results {
		if r.GetToolUseId() != "x" || r.GetIsError() || text(r) != "ok x once" {
			t.Fatalf("result %v %q, want the first call's for both", r.GetIsError(), text(r))
		}
	}
	if n := h.tool.runCount("x"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// A session keeps the last 1,000 finished calls whole and only a hash of
// the ids of older ones: a repeated id of an old call runs nothing and gets an error
// result that says it ran, and the session does not hold what every call
// returned.
func TestDuplicateOfAnOldCallRunsOnce(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(&executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
	const calls = 1100
	for i := range calls {
		s.use(fmt.Sprintf("c%d", i), fmt.Sprintf("m%d", i), `{"output":"x"}`)
		s.results(1)
	}
	s.use("c0", "again", `{"output":"twice"}`)
	var dup bool
	var second *executorv1.Result
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if a := ev.GetAccepted(); a != nil {
			dup = a.GetDuplicate()
		}
		second = ev.GetResult()
		return second != nil
	})
	if !dup || !second.GetIsError() || !strings.Contains(text(second), "already ran earlier in this session") {
		t.Fatalf("duplicate of an old call: accepted dup=%v result %v %q", dup, second.GetIsError(), text(second))
	}
	if n := h.tool.runCount("c0"); n != 1 {
		t.Fatalf("c0 ran %d times", n)
	}
	// A recent one still gets its first Result again.
	s.use(fmt.Sprintf("c%d", calls-1), "again2", `{"output":"twice"}`)
	var third *executorv1.Result
	s.until(func(ev *executorv1.ExecuteResponse) bool { third = ev.GetResult(); return third != nil })
	if third.GetIsError() || strings.Contains(text(third), "already ran") {
		t.Fatalf("duplicate of a recent call: %v %q", third.GetIsError(), text(third))
	}
}

func TestEveryFailureIsAResult(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(&executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
	s.useTool("u", "m1", "NoSuchTool", `{}`)
	s.use("p", "m1", `{"panic":true}`)
	s.use("j", "m1", `{"gate":`)
	s.use("v", "m1", `{"gate":1}`)
	got := map[string]*executorv1.Result{}
	for _, r := range s.results(4) {
		got[r.GetToolUseId()] = r
	}
	for id, want := range map[string]struct {
		outcome executorv1.Outcome
		text    string
	}{
		"u": {executorv1.Outcome_OUTCOME_UNKNOWN_TOOL, "<tool_use_error>Error: No such tool available: NoSuchTool</tool_use_error>"},
		"p": {executorv1.Outcome_OUTCOME_INTERNAL_ERROR, "boom"},
		"j": {executorv1.Outcome_OUTCOME_INVALID_INPUT, "could not be parsed as JSON"},
		"v": {executorv1.Outcome_OUTCOME_INVALID_INPUT, "The parameter `gate` type is expected as `string` but provided as `number`"},
	} {
		r := got[id]
		if r.GetOutcome() != want.outcome || !r.GetIsError() || !strings.Contains(text(r), want.text) {
			t.Errorf("%s: got %v %q, want %v containing %q", id, r.GetOutcome(), text(r), want.outcome, want.text)
		}
	}
}

func TestProgressFloodDoesNotHoldBackOtherCalls(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(&executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
	// 64 MiB of progress from one call, while the client reads nothing.
	s.use("flood", "m1", `{"flood":1024,"gate":"flood","safe":true}`)
	s.use("quick", "m1", `{"safe":true,"output":"\u0000\u00ff binary"}`)
	var quick *executorv1.Result
	var progressBytes, dropped uint64
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if p := ev.GetProgress(); p != nil && p.GetToolUseId() == "flood" {
			progressBytes += uint64(len(p.GetOutput()))
			dropped += p.GetDroppedBytes()
		}
		if r := ev.GetResult(); r != nil && r.GetToolUseId() == "quick" {
			quick = r
			return true
		}
		return false
	})
	if quick.GetIsError() {
		t.Fatalf("quick: %v", quick)
	}
	h.gates.release("flood")
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if p := ev.GetProgress(); p != nil && p.GetToolUseId() == "flood" {
			progressBytes += uint64(len(p.GetOutput()))
			dropped += p.GetDroppedBytes()
		}
		return ev.GetResult().GetToolUseId() == "flood"
	})
	if progressBytes+dropped != 1024*64<<10 {
		t.Fatalf("progress bytes %d + dropped %d != produced %d", progressBytes, dropped, 1024*64<<10)
	}
}

func TestHalfCloseEndsSessionAfterResults(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("a", "m1", `{"gate":"a"}`)
	if err := s.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	s.until(startedEvent("a"))
	h.gates.release("a")
	if r := s.results(1)[0]; r.GetToolUseId() != "a" {
		t.Fatalf("result %v", r)
	}
	if _, ok := <-s.events; ok {
		t.Fatal("more events after the last result")
	}
	if err := <-s.errc; err != io.EOF {
		t.Fatalf("stream ended with %v, want a clean end", err)
	}
	if n := h.ex.Sessions(); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

func TestResumeReplaysMissedEvents(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	id := s.hello.GetSessionId()
	s.use("a", "m1", `{"gate":"a","output":"before"}`)
	evs := s.until(startedEvent("a"))
	last := evs[len(evs)-1].GetSequence()
	s.cancel() // the connection drops; the call keeps running
	<-s.errc
	h.gates.release("a")

	r := h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{SessionId: id, LastSequence: last}}})
	if !r.hello.GetResumed() || r.hello.GetSessionId() != id {
		t.Fatalf("hello %v", r.hello)
	}
	var seqs []uint64
	got := r.until(func(ev *executorv1.ExecuteResponse) bool {
		seqs = append(seqs, ev.GetSequence())
		return ev.GetResult() != nil
	})
	res := got[len(got)-1].GetResult()
	if res.GetToolUseId() != "a" || res.GetIsError() {
		t.Fatalf("result after resume %v", res)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] || seqs[0] <= last {
			t.Fatalf("replayed sequence numbers %v after %d", seqs, last)
		}
	}
	if n := h.tool.runCount("a"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

func TestProtocolErrors(t *testing.T) {
	h := newHarness(t, executor.Config{})
	ctx := context.Background()
	for name, first := range map[string]*executorv1.ExecuteRequest{
		"tool use first": {Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{Id: "x"}}},
		"unknown resume": {Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{SessionId: "nope"}}},
	} {
		t.Run(name, func(t *testing.T) {
			st, err := h.client.Execute(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Send(first)
			_, err = st.Recv()
			want := codes.InvalidArgument
			if name == "unknown resume" {
				want = codes.NotFound
			}
			if status.Code(err) != want {
				t.Fatalf("got %v, want %v", err, want)
			}
		})
	}
	s := h.open(nil)
	s.use("", "m1", `{}`)
	<-s.events
	if err := <-s.errc; status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty id: %v", err)
	}
}

func TestExecutorCloseInterruptsCalls(t *testing.T) {
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("a", "m1", `{"gate":"never"}`)
	s.use("b", "m1", `{}`)
	s.until(startedEvent("a"))
	go h.ex.Close()
	for _, r := range s.results(2) {
		if r.GetOutcome() != executorv1.Outcome_OUTCOME_INTERRUPTED {
			t.Fatalf("result %v", r)
		}
	}
}
