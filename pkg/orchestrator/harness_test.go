package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"

	"go.uber.org/goleak"

	"google.golang.org/grpc"

	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore/pgtest"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
)

func TestMain(m *testing.M) {
	sandbox.RunChildIfRequested()
	// The replica tests' throwaway PostgreSQL, if any, stops with them.
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// harness is an orchestrator wired to the scripted fake API and a real
// in-process executor (the same server code as a remote toolsvc).
type harness struct {
	t        *testing.T
	root     string // the executor's workspace
	fake     *fakeapi.Server
	emb      *embedded.Executor
	storeDir string
	store    *transcript.Store
	orch     *orchestrator.Orchestrator
	perms    orchestrator.PermissionFunc
	closed   bool
}

func newHarness(t *testing.T, replies ...fakeapi.Reply) *harness {
	t.Helper()
	return newHarnessWith(t, embedded.Config{}, replies...)
}

// newHarnessWith is newHarness with an executor configured by cfg (its
// Root is the harness's).
func newHarnessWith(t *testing.T, cfg embedded.Config, replies ...fakeapi.Reply) *harness {
	t.Helper()
	h := &harness{t: t, root: sandboxtest.Dir(t), storeDir: t.TempDir(), fake: fakeapi.New(t, replies...)}
	cfg.Root = h.root
	emb, err := embedded.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start embedded executor: %v", err)
	}
	h.emb = emb
	t.Cleanup(func() {
		h.close()
		emb.Close()
	})
	h.open()
	return h
}

// workspaceDir returns a workspace the sandbox's unprivileged user can use:
// when the tests run as root, tool processes run as the workspace's owner,
// so it is given to nobody.

// open starts an orchestrator on the harness's store directory.
func (h *harness) open() {
	h.t.Helper()
	client, err := model.New(model.Config{
		APIKey: "test", BaseURL: h.fake.URL, Model: "claude-test",
		MaxRetries: 2, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 2 * time.Millisecond,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	st, err := transcript.Open(h.storeDir, transcript.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model:           client,
		Executor:        executorClient(h.t, h.emb.Conn()),
		DefaultExecutor: "embedded",
		Store:           orchestrator.FileStore(st),
		Permissions: func(id string, r execapi.PermissionRequest) *execapi.PermissionDecision {
			return h.permission(id, r)
		},
		AbortGrace: 5 * time.Second,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.orch, h.closed = st, orch, false
}

// executorClient returns the gRPC client of the executor at conn, whatever
// the address.
func executorClient(t *testing.T, conn grpc.ClientConnInterface) *execgrpc.Client {
	t.Helper()
	c, err := execgrpc.NewClient(execgrpc.ClientConfig{
		Conn: func(context.Context, string) (grpc.ClientConnInterface, error) { return conn, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (h *harness) permission(id string, r execapi.PermissionRequest) *execapi.PermissionDecision {
	if h.perms == nil {
		return nil
	}
	return h.perms(id, r)
}

func (h *harness) close() {
	if h.closed {
		return
	}
	h.closed = true
	h.orch.Close()
	h.store.Close()
}

// restart stops the orchestrator and starts a new one on the same store and
// executor, as a process restart would.
func (h *harness) restart() {
	h.close()
	h.open()
}

// bypass is a session configuration whose calls run without asking.
var bypass = orchestrator.SessionConfig{Settings: &settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}}}

func (h *harness) session(cfg orchestrator.SessionConfig) *orchestrator.Session {
	h.t.Helper()
	s, err := h.orch.Create(context.Background(), "", cfg)
	if err != nil {
		h.t.Fatalf("create session: %v", err)
	}
	return s
}

func (h *harness) run(s *orchestrator.Session, text string) *orchestrator.TurnResult {
	h.t.Helper()
	// A bound against hangs, not a timing check: a turn that streams a
	// 16 MiB tool_use (TestOversizedToolUse) takes about a minute under
	// -race on two busy cores.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, text)
	if err != nil {
		h.t.Fatalf("run: %v", err)
	}
	if errs := h.fake.Errors(); len(errs) > 0 {
		h.t.Fatalf("fake API errors: %v", errs)
	}
	return res
}

// write creates a file in the workspace and returns its absolute path.
func (h *harness) write(name, content string) string {
	h.t.Helper()
	p := h.root + "/" + name
	if err := writeFile(p, content); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// events returns the session's events published so far.
func events(s *orchestrator.Session) []orchestrator.Event {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Next still returns held events
	sub := s.Subscribe(0)
	var out []orchestrator.Event
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return out
		}
		out = append(out, ev)
	}
}

func ofKind(evs []orchestrator.Event, k orchestrator.EventKind) []orchestrator.Event {
	var out []orchestrator.Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for the first event of s satisfying ok.
func waitEvent(t *testing.T, s *orchestrator.Session, ok func(orchestrator.Event) bool) orchestrator.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := s.Subscribe(0)
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for an event: %v", err)
		}
		if ok(ev) {
			return ev
		}
	}
}

// lastMessage returns the newest message of a recorded request.
func lastMessage(t *testing.T, r *fakeapi.Request) model.Message {
	t.Helper()
	msgs := r.Body.Messages
	if len(msgs) == 0 {
		t.Fatalf("request %d has no messages", r.Index)
	}
	return msgs[len(msgs)-1]
}

// toolResults returns the tool_result blocks of m by tool_use id, and their
// order.
func toolResults(m model.Message) (map[string]model.Block, []string) {
	byID := map[string]model.Block{}
	var order []string
	for _, b := range m.Content {
		if b.Type == model.BlockToolResult {
			byID[b.ToolUseID] = b
			order = append(order, b.ToolUseID)
		}
	}
	return byID, order
}

func resultText(b model.Block) string {
	var s strings.Builder
	for _, c := range b.Content {
		s.WriteString(c.Text)
	}
	return s.String()
}

func isError(b model.Block) bool { return b.IsError != nil && *b.IsError }

// checkValid asserts the transcript rules the API enforces: roles
// alternate, starting with the user, and every tool_use is answered by
// exactly one tool_result in the next message.
func checkValid(t *testing.T, msgs []model.Message) {
	t.Helper()
	for i, m := range msgs {
		want := model.RoleUser
		if i%2 == 1 {
			want = model.RoleAssistant
		}
		if m.Role != want {
			t.Fatalf("message %d has role %s, want %s", i, m.Role, want)
		}
		if m.Role != model.RoleAssistant {
			continue
		}
		uses := m.ToolUses()
		if len(uses) == 0 {
			continue
		}
		if i+1 >= len(msgs) {
			t.Fatalf("message %d: %d tool_use blocks without results", i, len(uses))
		}
		res, order := toolResults(msgs[i+1])
		if len(order) != len(uses) {
			t.Fatalf("message %d: %d tool_use blocks, %d tool_results", i, len(uses), len(order))
		}
		for _, u := range uses {
			if _, ok := res[u.ID]; !ok {
				t.Fatalf("message %d: tool_use %s has no tool_result", i, u.ID)
			}
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
