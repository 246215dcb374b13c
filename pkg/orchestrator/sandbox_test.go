package orchestrator_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/sandbox"
)

// A session's sandbox requirement is checked at every connection: after
// a restart the session reconnects to an executor that no longer enforces
// Landlock, and its turn ends with the refusal before any model request;
// what the first executor enforced was reported while it was connected.
func TestSandboxRequirementAfterRestart(t *testing.T) {
	h := newHarness(t, fakeapi.EndTurn(fakeapi.Text("one")))
	cfg := bypass
	cfg.RequireSandbox = []string{"landlock"}
	s := h.session(cfg)
	if sb, ok := s.Sandbox(); !ok || !slices.Contains(sb.Enforced, "landlock_fs") {
		t.Fatalf("sandbox of a connected session: %+v, %v", sb, ok)
	}
	if info := s.Info(); info.Sandbox == nil || !slices.Contains(info.Sandbox.Enforced, "landlock_scope") {
		t.Fatalf("Info().Sandbox = %+v", info.Sandbox)
	}
	if r := h.run(s, "first"); r.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("first turn: %+v", r)
	}
	id := s.ID()

	h.close()
	unconfined, err := embedded.Start(context.Background(), embedded.Config{Root: h.root,
		Sandbox: sandbox.Config{Backend: sandbox.BackendNone}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unconfined.Close() })
	h.emb = unconfined
	h.open()
	s, err = h.orch.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(s.LastSequence())
	requests := len(h.fake.Requests())
	r := h.run(s, "second")
	var missing *handshake.MissingError
	if r.StopReason != orchestrator.StopError || !errors.Is(r.Err, orchestrator.ErrSandboxRequirement) ||
		!errors.As(r.Err, &missing) || len(missing.Missing) != 1 || !strings.HasPrefix(missing.Missing[0], "landlock ") {
		t.Fatalf("turn on an unconfined executor: %+v", r)
	}
	if n := len(h.fake.Requests()); n != requests {
		t.Errorf("%d model requests on a refused executor", n-requests)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the events already held
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal("no error event of kind sandbox_requirement")
		}
		if ev.Kind == orchestrator.EventError {
			if ev.Error.Kind != "sandbox_requirement" {
				t.Errorf("error event kind %q", ev.Error.Kind)
			}
			break
		}
	}
	// A session without the requirement runs there.
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("two")))
	if r := h.run(h.session(bypass), "third"); r.StopReason != orchestrator.StopEndTurn {
		t.Errorf("a session requiring nothing: %+v", r)
	}
}
