// Package storetest is the test suite every orchestrator.Store passes: the
// file store and PostgreSQL run the same tests.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// Factory returns a new, empty store for one test; the test closes it.
type Factory func(t *testing.T) orchestrator.Store

// Run runs the suite against the stores open makes.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st orchestrator.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Errors", testErrors},
		{"List", testList},
		{"Remove", testRemove},
		{"Binding", testBinding},
		{"Lease", testLease},
		{"LeaseExpiry", testLeaseExpiry},
		{"Events", testEvents},
		{"EventRace", testEventRace},
		{"Notes", testNotes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { _ = st.Close() })
			tc.fn(t, st)
		})
	}
}

var ctx = context.Background()

func config() orchestrator.SessionConfig {
	return orchestrator.SessionConfig{
		Executor: "10.0.0.7:7070", Model: "claude-test", MaxTurns: 7, Directory: "/home/u/project",
		DisallowedTools: []string{"Write"},
		Settings: &settings.Settings{Permissions: settings.Permissions{
			Allow: []string{"Read"}, Deny: []string{"Bash(rm:*)"}, DefaultMode: permission.ModePlan}},
		Options: &execapi.SessionOptions{ResultOrder: execapi.OrderCompletion, MaxConcurrency: 2, DefaultTimeout: 90 * time.Second},
	}
}

func create(t *testing.T, st orchestrator.Store, id string) {
	t.Helper()
	if err := st.Create(ctx, id, config(), time.Now().UTC()); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

func appendMsg(t *testing.T, st orchestrator.Store, id string, m model.Message) {
	t.Helper()
	if err := st.Append(ctx, id, transcript.Record{Kind: transcript.KindMessage, Time: time.Now(), Message: &m}); err != nil {
		t.Fatalf("append to %s: %v", id, err)
	}
}

func user(text string) model.Message {
	return model.Message{Role: model.RoleUser, Content: []model.Block{model.TextBlock(text)}}
}

func testRoundTrip(t *testing.T, st orchestrator.Store) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := config()
	if err := st.Create(ctx, "s1", cfg, created); err != nil {
		t.Fatal(err)
	}
	isErr := true
	// Key order of a tool input is kept as the model wrote it.
	input := json.RawMessage(`{"command":"false","description":"fails","timeout":5}`)
	msgs := []model.Message{
		user("hi"),
		{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "t1", Name: "Bash", Input: input}}},
		{Role: model.RoleUser, Content: []model.Block{model.ToolResultBlock("t1", []model.Block{model.TextBlock("Exit code 1")}, &isErr)}},
		user("[Request interrupted by user]"),
	}
	for _, m := range msgs {
		appendMsg(t, st, "s1", m)
	}
	u := model.Usage{InputTokens: 10, OutputTokens: 3}
	for range 2 {
		if err := st.Append(ctx, "s1", transcript.Record{Kind: transcript.KindTurn, Time: time.Now(),
			Turn: &transcript.Turn{StopReason: "end_turn", Usage: u, Requests: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Append(ctx, "s1", transcript.Record{Kind: transcript.KindPlaced, Time: time.Now(), Executor: "10.0.0.8:7070"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(created) || got.ID != "s1" {
		t.Errorf("created %v id %q, want %v s1", got.Created, got.ID, created)
	}
	want := cfg
	want.Executor = "10.0.0.8:7070"
	if a, b := mustJSON(t, got.Config), mustJSON(t, want); a != b {
		t.Errorf("config\n got %s\nwant %s", a, b)
	}
	// The tool result and the user text after it are one user message.
	if len(got.Messages) != 3 || len(got.Messages[2].Content) != 2 {
		t.Fatalf("messages %s, want 3 with the last two user messages joined", mustJSON(t, got.Messages))
	}
	if in := string(got.Messages[1].Content[0].Input); in != string(input) {
		t.Errorf("tool input %s, want %s", in, input)
	}
	if got.Turns != 2 || got.Usage != u.Add(u) {
		t.Errorf("turns %d usage %+v, want 2 and %+v", got.Turns, got.Usage, u.Add(u))
	}
	newCfg := cfg
	newCfg.Model, newCfg.MaxTurns = "claude-other", 3
	if err := st.Append(ctx, "s1", transcript.Record{Kind: transcript.KindConfig, Time: time.Now(), Config: &newCfg}); err != nil {
		t.Fatal(err)
	}
	got, err = st.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.Model != "claude-other" || got.Config.MaxTurns != 3 {
		t.Errorf("after a config record: model %q max turns %d", got.Config.Model, got.Config.MaxTurns)
	}
	if got.Open {
		t.Error("a transcript whose last message is followed by a turn record is open")
	}
	appendMsg(t, st, "s1", user("a turn begins"))
	if got, err = st.Load(ctx, "s1"); err != nil || !got.Open {
		t.Errorf("a transcript with a message after its last turn record: open %v, %v", got.Open, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func testErrors(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	if err := st.Create(ctx, "s1", config(), time.Now()); !errors.Is(err, orchestrator.ErrExists) {
		t.Errorf("second create: %v, want ErrExists", err)
	}
	if _, err := st.Load(ctx, "nope"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("load of a missing session: %v, want ErrNotFound", err)
	}
	if err := st.Remove(ctx, "nope"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("remove of a missing session: %v, want ErrNotFound", err)
	}
	m := user("x")
	if err := st.Append(ctx, "nope", transcript.Record{Kind: transcript.KindMessage, Message: &m}); err == nil {
		t.Error("append to a missing session succeeded")
	}
	for _, bad := range []string{"../x", "", "a/b", "-x"} {
		if err := st.Create(ctx, bad, config(), time.Now()); !errors.Is(err, transcript.ErrInvalidID) {
			t.Errorf("create %q: %v, want ErrInvalidID", bad, err)
		}
		if _, err := st.Load(ctx, bad); !errors.Is(err, transcript.ErrInvalidID) {
			t.Errorf("load %q: %v, want ErrInvalidID", bad, err)
		}
	}
	if _, err := st.Binding(ctx, "nope"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("binding of a missing session: %v, want ErrNotFound", err)
	}
	if err := st.Acquire(ctx, "nope", "r1", time.Minute); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("lease of a missing session: %v, want ErrNotFound", err)
	}
	if err := st.AddEvent(ctx, "nope", orchestrator.StoredEvent{Seq: 1, Data: []byte("{}")}); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("event of a missing session: %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, st orchestrator.Store) {
	create(t, st, "a")
	appendMsg(t, st, "a", user("first prompt"))
	appendMsg(t, st, "a", model.Message{Role: model.RoleAssistant, Content: []model.Block{model.TextBlock("ok")}})
	appendMsg(t, st, "a", user("second"))
	appendMsg(t, st, "a", user("joined"))
	if err := st.Append(ctx, "a", transcript.Record{Kind: transcript.KindTurn, Time: time.Now(),
		Turn: &transcript.Turn{Usage: model.Usage{InputTokens: 5, OutputTokens: 2}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // file times: b is updated after a
	create(t, st, "b")
	sums, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(sums))
	for _, s := range sums {
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, []string{"b", "a"}) {
		t.Fatalf("list %v, want [b a] (most recently updated first)", ids)
	}
	a := sums[1]
	if a.Prompt != "first prompt" || a.Messages != 3 || a.Turns != 1 || a.Model != "claude-test" ||
		a.Directory != "/home/u/project" || a.Executor != "10.0.0.7:7070" || a.Usage.InputTokens != 5 || a.Created.IsZero() {
		t.Errorf("summary of a: %+v", a)
	}
}

func testRemove(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	create(t, st, "s2")
	if err := st.AddEvent(ctx, "s1", orchestrator.StoredEvent{Seq: 1, Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(ctx, "s1"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("load after remove: %v", err)
	}
	sums, err := st.List(ctx)
	if err != nil || len(sums) != 1 || sums[0].ID != "s2" {
		t.Errorf("list after remove: %+v %v", sums, err)
	}
	// A session made again under the id starts empty.
	create(t, st, "s1")
	if last, err := st.LastEvent(ctx, "s1"); err != nil || last != 0 {
		t.Errorf("last event of a new session: %d %v", last, err)
	}
}

func testBinding(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	b, err := st.Binding(ctx, "s1")
	if err != nil || b != (orchestrator.Binding{}) {
		t.Fatalf("binding of a new session: %+v %v", b, err)
	}
	want := orchestrator.Binding{Executor: "10.0.0.7:7070", SessionID: "s1", Seq: 4}
	if err := st.Bind(ctx, "s1", want); err != nil {
		t.Fatal(err)
	}
	if b, err = st.Binding(ctx, "s1"); err != nil || b != want {
		t.Fatalf("binding %+v %v, want %+v", b, err, want)
	}
	// An event that came from an executor event moves the sequence.
	if err := st.AddEvent(ctx, "s1", orchestrator.StoredEvent{Seq: 1, Data: []byte(`{"k":1}`), ExecSeq: 9}); err != nil {
		t.Fatal(err)
	}
	want.Seq = 9
	if b, err = st.Binding(ctx, "s1"); err != nil || b != want {
		t.Fatalf("binding after an event %+v %v, want %+v", b, err, want)
	}
}

func testLease(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	if h, _, err := st.Lease(ctx, "s1"); err != nil || h != "" {
		t.Fatalf("lease of a new session: %q %v", h, err)
	}
	if err := st.Acquire(ctx, "s1", "r1", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := st.Acquire(ctx, "s1", "r2", time.Minute)
	var le *orchestrator.LeaseError
	if !errors.As(err, &le) || !errors.Is(err, orchestrator.ErrBusy) || le.Holder != "r1" || le.Expiry.Before(time.Now()) {
		t.Fatalf("second replica's acquire: %v, want a LeaseError held by r1", err)
	}
	if err := st.Acquire(ctx, "s1", "r1", time.Minute); err != nil {
		t.Errorf("holder's acquire again: %v", err)
	}
	if err := st.Renew(ctx, "s1", "r1", time.Minute); err != nil {
		t.Errorf("renew: %v", err)
	}
	if err := st.Renew(ctx, "s1", "r2", time.Minute); !errors.Is(err, orchestrator.ErrLeaseLost) {
		t.Errorf("renew by another: %v, want ErrLeaseLost", err)
	}
	if ok, err := st.TakeOver(ctx, "s1", "r2", time.Minute); ok || err != nil {
		t.Errorf("take over of a live lease: %v %v", ok, err)
	}
	if ids, err := st.Expired(ctx); err != nil || len(ids) != 0 {
		t.Errorf("expired: %v %v, want none", ids, err)
	}
	if err := st.EndLease(ctx, "s1", "r2"); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := st.Lease(ctx, "s1"); h != "r1" {
		t.Errorf("after another's EndLease the holder is %q, want r1", h)
	}
	if err := st.EndLease(ctx, "s1", "r1"); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := st.Lease(ctx, "s1"); h != "" {
		t.Errorf("after EndLease the holder is %q", h)
	}
	if err := st.Acquire(ctx, "s1", "r2", time.Minute); err != nil {
		t.Errorf("acquire of a freed lease: %v", err)
	}
}

func testLeaseExpiry(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	create(t, st, "s2")
	if err := st.Acquire(ctx, "s1", "r1", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := st.Acquire(ctx, "s2", "r1", time.Hour); err != nil {
		t.Fatal(err)
	}
	// An expired lease is still held: a new turn is refused until the
	// turn it belongs to is taken over.
	for {
		ids, err := st.Expired(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(ids, []string{"s1"}) {
			break
		}
		if len(ids) != 0 {
			t.Fatalf("expired %v, want [s1]", ids)
		}
		time.Sleep(time.Millisecond)
	}
	if err := st.Acquire(ctx, "s1", "r2", time.Minute); !errors.Is(err, orchestrator.ErrBusy) {
		t.Errorf("acquire of an expired lease: %v, want ErrBusy", err)
	}
	var wg sync.WaitGroup
	won := make([]bool, 4)
	for i := range won {
		wg.Go(func() {
			ok, err := st.TakeOver(ctx, "s1", fmt.Sprintf("r%d", i+2), time.Hour)
			if err != nil {
				t.Error(err)
			}
			won[i] = ok
		})
	}
	wg.Wait()
	winner := ""
	for i, ok := range won {
		if ok {
			if winner != "" {
				t.Fatalf("two replicas took the lease over: %v", won)
			}
			winner = fmt.Sprintf("r%d", i+2)
		}
	}
	if winner == "" {
		t.Fatal("no replica took the expired lease over")
	}
	if h, _, _ := st.Lease(ctx, "s1"); h != winner {
		t.Errorf("holder %q, want %q", h, winner)
	}
	if err := st.Renew(ctx, "s1", "r1", time.Minute); !errors.Is(err, orchestrator.ErrLeaseLost) {
		t.Errorf("renew by the replica that lost it: %v, want ErrLeaseLost", err)
	}
	if ids, _ := st.Expired(ctx); len(ids) != 0 {
		t.Errorf("expired after the take-over: %v", ids)
	}
}

func testEvents(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	create(t, st, "s2")
	for i := uint64(1); i <= 3; i++ {
		if err := st.AddEvent(ctx, "s1", orchestrator.StoredEvent{Seq: i, Data: fmt.Appendf(nil, `{"n":%d}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddEvent(ctx, "s2", orchestrator.StoredEvent{Seq: 1, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{3, 5, 0} {
		if err := st.AddEvent(ctx, "s1", orchestrator.StoredEvent{Seq: seq, Data: []byte(`{}`)}); !errors.Is(err, orchestrator.ErrEventConflict) {
			t.Errorf("event %d after 3: %v, want ErrEventConflict", seq, err)
		}
	}
	evs, err := st.Events(ctx, "s1", 1, 10)
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 || string(evs[1].Data) != `{"n":3}` {
		t.Fatalf("events after 1: %+v %v", evs, err)
	}
	if evs, _ = st.Events(ctx, "s1", 0, 1); len(evs) != 1 || evs[0].Seq != 1 {
		t.Errorf("first event with limit 1: %+v", evs)
	}
	if evs, _ = st.Events(ctx, "s1", 3, 10); len(evs) != 0 {
		t.Errorf("events after the last: %+v", evs)
	}
	if last, err := st.LastEvent(ctx, "s1"); err != nil || last != 3 {
		t.Errorf("last event %d %v, want 3", last, err)
	}
}

// testNotes: every listener gets every note, in order, from the moment
// it is ready.
func testNotes(t *testing.T, st orchestrator.Store) {
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	type listener struct {
		ready chan struct{}
		got   chan orchestrator.Note
		done  chan error
	}
	var ls []*listener
	for range 2 {
		l := &listener{ready: make(chan struct{}), got: make(chan orchestrator.Note, 10), done: make(chan error, 1)}
		go func() {
			l.done <- st.Listen(lctx, func() { close(l.ready) }, func(n orchestrator.Note) { l.got <- n })
		}()
		<-l.ready
		ls = append(ls, l)
	}
	reason := "stop it"
	sent := []orchestrator.Note{
		{SessionID: "s1", Interrupt: &reason},
		{SessionID: "s2", Decision: &execapi.PermissionDecision{ToolUseID: "toolu_1", Behavior: execapi.PermissionAllowOnce}},
	}
	for _, n := range sent {
		if err := st.Notify(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range ls {
		for _, want := range sent {
			select {
			case got := <-l.got:
				if mustJSON(t, got) != mustJSON(t, want) {
					t.Errorf("listener %d got %s, want %s", i, mustJSON(t, got), mustJSON(t, want))
				}
			case <-time.After(time.Minute):
				t.Fatalf("listener %d: no note", i)
			}
		}
	}
	stop()
	for _, l := range ls {
		<-l.done
	}
}

// testEventRace: of replicas that store the same next event at once,
// exactly one succeeds.
func testEventRace(t *testing.T, st orchestrator.Store) {
	create(t, st, "s1")
	for seq := uint64(1); seq <= 20; seq++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range 3 {
			wg.Go(func() {
				err := st.AddEvent(ctx, "s1", orchestrator.StoredEvent{Seq: seq, Data: []byte(`{}`)})
				switch {
				case err == nil:
					mu.Lock()
					ok++
					mu.Unlock()
				case !errors.Is(err, orchestrator.ErrEventConflict):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if ok != 1 {
			t.Fatalf("event %d stored by %d writers, want 1", seq, ok)
		}
	}
}
