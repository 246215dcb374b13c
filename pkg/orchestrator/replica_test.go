package orchestrator_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore/pgtest"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/tool"
)

// replicas starts n orchestrators on one PostgreSQL and one in-process
// executor, named r0, r1, ..., each with its configuration changed by
// opts.
func replicas(t *testing.T, fake *fakeapi.Server, n int, opts ...func(*orchestrator.Config)) ([]*orchestrator.Orchestrator, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	emb, err := embedded.Start(context.Background(), embedded.Config{Root: sandboxtest.Dir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	var out []*orchestrator.Orchestrator
	for i := range n {
		st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		client, err := model.New(model.Config{APIKey: "test", BaseURL: fake.URL, Model: "claude-test",
			MaxRetries: 2, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cfg := orchestrator.Config{
			Model: client, Executor: executorClient(t, emb.Conn()), DefaultExecutor: "embedded",
			Store: st, Replica: "r" + string(rune('0'+i)), LeaseTTL: time.Second,
		}
		for _, opt := range opts {
			opt(&cfg)
		}
		o, err := orchestrator.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			o.Close()
			st.Close()
		})
		out = append(out, o)
	}
	return out, dsn
}

// onBoth creates session id on rs[0] and returns it as each of the first
// two replicas serves it.
func onBoth(t *testing.T, rs []*orchestrator.Orchestrator, id string) (s0, s1 *orchestrator.Session) {
	t.Helper()
	ctx := context.Background()
	s0, err := rs[0].Create(ctx, id, orchestrator.SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if s1, err = rs[1].Session(ctx, id); err != nil {
		t.Fatal(err)
	}
	return s0, s1
}

// turnEvents reads sub's events up to the end of a turn, which it includes.
func turnEvents(t *testing.T, ctx context.Context, sub *orchestrator.Subscription) []orchestrator.Event {
	t.Helper()
	var evs []orchestrator.Event
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if ev.Kind == orchestrator.EventTurnComplete {
			return evs
		}
	}
}

// TestReplicasServeAnySession: a session created on one replica is served
// by the other: turns run on either, each sees the other's, a turn running
// on one makes the other refuse a second (SESSION_BUSY, naming the
// holder) while its clients follow the running turn's events.
func TestReplicasServeAnySession(t *testing.T) {
	gate := make(chan struct{})
	fake := fakeapi.New(t,
		fakeapi.EndTurn(fakeapi.Text("hi from r1")),
		fakeapi.EndTurn(fakeapi.Block{Type: "text", Text: "held on r0", Wait: gate}),
	)
	rs, _ := replicas(t, fake, 2)
	ctx := context.Background()
	if _, err := rs[0].Create(ctx, "s1", orchestrator.SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	s1, err := rs[1].Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s1.Run(ctx, "hello")
	if err != nil || res.Text != "hi from r1" {
		t.Fatalf("turn on r1: %+v %v", res, err)
	}
	s0, err := rs[0].Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if info := s0.Info(); info.Turns != 1 || info.MessageCount != 2 {
		t.Fatalf("r0 after r1's turn: %+v", info)
	}

	// r1 follows the turn r0 runs.
	sub := s1.Subscribe(s1.LastSequence())
	if err := s0.Start("again"); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.WaitRequests(ctx, 2); err != nil {
		t.Fatal(err)
	}
	err = s1.Start("a third")
	var le *orchestrator.LeaseError
	if !errors.Is(err, orchestrator.ErrBusy) || !errors.As(err, &le) || le.Holder != "r0" {
		t.Fatalf("second turn on r1: %v, want ErrBusy held by r0", err)
	}
	if !s1.Info().Busy {
		t.Error("r1 does not report the session busy while r0 runs its turn")
	}
	close(gate)
	evs := turnEvents(t, ctx, sub)
	if end := evs[len(evs)-1]; end.Turn.Text != "held on r0" {
		t.Errorf("turn complete on r1: %+v", end.Turn)
	}
	if len(ofKind(evs, orchestrator.EventText)) == 0 {
		t.Error("r1's client saw no text of r0's turn")
	}
	// The lease is free again: r1 runs the next turn.
	fake.Push(fakeapi.EndTurn(fakeapi.Text("third")))
	if res, err := s1.Run(ctx, "a third"); err != nil || res.Text != "third" {
		t.Fatalf("turn on r1 after r0's: %+v %v", res, err)
	}
	reqs := fake.Requests()
	if msgs := reqs[len(reqs)-1].Body.Messages; len(msgs) != 5 {
		t.Errorf("r1's request carries %d messages, want the 5 of both replicas' turns", len(msgs))
	}
	for _, o := range rs {
		infos, err := o.List(ctx)
		if err != nil || len(infos) != 1 || infos[0].Turns != 3 {
			t.Errorf("list: %+v %v", infos, err)
		}
	}
	if err := rs[1].Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rs[0].Session(ctx, "s1"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("r0 after r1 deleted the session: %v, want ErrNotFound", err)
	}
}

// TestReplicaInterruptReachesTheTurn: an interrupt that reaches a replica
// not running the turn stops it on the replica that does.
func TestReplicaInterruptReachesTheTurn(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Block{Type: "text", Text: "never", Wait: gate}))
	rs, _ := replicas(t, fake, 2)
	ctx := context.Background()
	s0, s1 := onBoth(t, rs, "s1")
	sub := s1.Subscribe(s1.LastSequence())
	if err := s0.Start("wait"); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s1.Interrupt("from r1")
	evs := turnEvents(t, ctx, sub)
	if end := evs[len(evs)-1]; end.Turn.StopReason != orchestrator.StopInterrupted {
		t.Errorf("turn ended %s, want interrupted", end.Turn.StopReason)
	}
	msgs := s0.Messages()
	last := msgs[len(msgs)-1]
	if b := last.Content[len(last.Content)-1]; last.Role != model.RoleUser || b.Text != "[Request interrupted by user]" {
		t.Errorf("last message %+v, want it to end with the interrupt note", last)
	}
}

// TestExpiredLeaseWithoutATurn: a replica that took a session's lease and
// died before the turn's first message was stored leaves nothing to go on
// with: another replica frees the lease without writing anything, and the
// next turn runs.
func TestExpiredLeaseWithoutATurn(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("first")), fakeapi.EndTurn(fakeapi.Text("second")))
	rs, dsn := replicas(t, fake, 1)
	ctx := context.Background()
	s, err := rs[0].Create(ctx, "s1", orchestrator.SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Run(ctx, "one"); err != nil || res.Text != "first" {
		t.Fatalf("first turn: %+v %v", res, err)
	}
	ghost, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ghost.Close()
	if err := ghost.Acquire(ctx, "s1", "ghost", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for {
		holder, _, err := ghost.Lease(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if holder == "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, err := s.Run(ctx, "two"); err != nil || res.Text != "second" {
		t.Fatalf("second turn: %+v %v", res, err)
	}
	tr, err := ghost.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Turns != 2 || len(tr.Messages) != 4 || tr.Open {
		t.Errorf("transcript: %d turns, %d messages, open %v; want 2, 4, false", tr.Turns, len(tr.Messages), tr.Open)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
}

// TestReplicaEventsKeepTheirAgent: with a shared store a client reads a
// turn's events from the store, wherever the turn runs; a subagent's
// events keep the id of the Agent call that runs it there too.
func TestReplicaEventsKeepTheirAgent(t *testing.T) {
	fake := fakeapi.New(t)
	fake.SetFallback(subagentReply(
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_agent", "Agent", map[string]any{"description": "look", "prompt": "look"}))
			}
			return fakeapi.EndTurn(fakeapi.Text("done"))
		},
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_sub", "Glob", map[string]any{"pattern": "*.none"}))
			}
			return fakeapi.EndTurn(fakeapi.Text("nothing there"))
		}))
	rs, _ := replicas(t, fake, 2)
	ctx := context.Background()
	s0, s1 := onBoth(t, rs, "agents")
	sub := s1.Subscribe(s1.LastSequence())
	if res, err := s0.Run(ctx, "go"); err != nil || res.Text != "done" {
		t.Fatalf("turn on r0: %+v %v", res, err)
	}
	parents := map[string]string{} // tool_use id: its event's ParentToolUseID
	for _, ev := range turnEvents(t, ctx, sub) {
		switch ev.Kind {
		case orchestrator.EventToolUse:
			parents[ev.ToolUse.ID] = ev.ParentToolUseID
		case orchestrator.EventToolResult:
			if want := parents[ev.Result.ToolUseID]; ev.ParentToolUseID != want {
				t.Errorf("the result of %s came with parent %q, its tool_use with %q", ev.Result.ToolUseID, ev.ParentToolUseID, want)
			}
		}
	}
	if p, ok := parents["toolu_sub"]; !ok || p != "toolu_agent" || parents["toolu_agent"] != "" {
		t.Errorf("tool_use events on r1 with their parents: %v, want toolu_sub under toolu_agent", parents)
	}
}

// TestLateRenewalKeepsTheTurn: when the renewals of a turn's lease come
// late (a slow store) and the lease expires, the replica running the turn
// does not take it over from itself, which would end its own turn: the
// turn goes on and ends normally.
func TestLateRenewalKeepsTheTurn(t *testing.T) {
	gate := make(chan struct{})
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Block{Type: "text", Text: "finished", Wait: gate}))
	var logs testkit.Buffer
	rs, dsn := replicas(t, fake, 1, func(c *orchestrator.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := context.Background()
	s, err := rs[0].Create(ctx, "late", orchestrator.SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Every write of r0's lease leaves it expired, as renewals that
	// arrive too late do.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION late_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.lease_holder = 'r0' THEN NEW.lease_expiry := now() - interval '1 hour'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER late_renewal BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION late_renewal();`); err != nil {
		t.Fatal(err)
	}
	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, err := s.Run(ctx, "go")
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	testkit.WaitFor(t, time.Minute, "the sweep to find the expired lease of r0's own turn", func() bool {
		return len(done) > 0 || strings.Contains(logs.String(), "the lease of a turn this replica runs expired")
	})
	select {
	case res := <-done:
		t.Fatalf("the turn ended while its lease renewed late: %+v\n%s", res, logs.String())
	default:
	}
	close(gate)
	res := <-done
	if res == nil || res.StopReason != orchestrator.StopEndTurn || res.Text != "finished" {
		t.Fatalf("turn: %+v\n%s", res, logs.String())
	}
}

// TestLeftTurnKeepsToldResults: a turn whose replica stopped, and which no
// replica took over, is mended when the next turn starts: each call the
// transcript shows without a result gets the result clients were told of
// (stored as an event), or else an interrupted one, which clients are told
// of too. No call ends up with two results, or none.
func TestLeftTurnKeepsToldResults(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("carried on")))
	rs, dsn := replicas(t, fake, 1)
	ctx := context.Background()
	if _, err := rs[0].Create(ctx, "left", orchestrator.SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	// What a replica that stopped mid-turn left: the model's message with
	// two calls, and the event of one call's result.
	ghost, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ghost.Close()
	for _, m := range []model.Message{
		{Role: model.RoleUser, Content: []model.Block{model.TextBlock("run both")}},
		{Role: model.RoleAssistant, Content: []model.Block{
			{Type: model.BlockToolUse, ID: "toolu_told", Name: "Bash", Input: []byte(`{"command":"echo told"}`)},
			{Type: model.BlockToolUse, ID: "toolu_lost", Name: "Bash", Input: []byte(`{"command":"sleep 9"}`)},
		}},
	} {
		if err := ghost.Append(ctx, "left", transcript.Record{Kind: transcript.KindMessage, Time: time.Now(), Message: &m}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := ghost.LastEvent(ctx, "left")
	if err != nil {
		t.Fatal(err)
	}
	told, err := orchestrator.EncodeEvent(orchestrator.Event{Kind: orchestrator.EventToolResult,
		Result: &execapi.CallResult{ToolUseID: "toolu_told", ToolName: "Bash", Result: tool.Text("told")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ghost.AddEvent(ctx, "left", orchestrator.StoredEvent{Seq: last + 1, Data: told}); err != nil {
		t.Fatal(err)
	}

	s, err := rs[0].Session(ctx, "left")
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(s.LastSequence())
	if res, err := s.Run(ctx, "go on"); err != nil || res.Text != "carried on" {
		t.Fatalf("next turn: %+v %v", res, err)
	}
	results := map[string]int{}
	for _, ev := range ofKind(turnEvents(t, ctx, sub), orchestrator.EventToolResult) {
		results[ev.Result.ToolUseID]++
	}
	if results["toolu_told"] != 0 || results["toolu_lost"] != 1 {
		t.Errorf("result events in the next turn: %v, want one for toolu_lost only", results)
	}
	msgs := fake.Requests()[0].Body.Messages
	if len(msgs) != 3 {
		t.Fatalf("the next request carries %d messages: %+v", len(msgs), msgs)
	}
	got, _ := toolResults(msgs[2])
	if resultText(got["toolu_told"]) != "told" || !strings.Contains(resultText(got["toolu_lost"]), "Interrupted") {
		t.Errorf("the calls' results went back as %s", mustJSON(msgs[2]))
	}
}
