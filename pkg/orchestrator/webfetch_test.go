package orchestrator_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// webHarness is an orchestrator whose in-process executor runs with the
// host's network, WebFetch allowed to reach 127.0.0.1 by the operator,
// and a page on an HTTPS server there that the executor trusts.
func webHarness(t *testing.T, fake *fakeapi.Server) (*orchestrator.Orchestrator, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<h1>Changelog</h1><p>Version 3 removes the old API.</p>")
	}))
	t.Cleanup(srv.Close)
	// The executor verifies servers with the system's roots, which this
	// variable replaces; nothing in this test binary verified a server
	// before (the roots are read once).
	certFile := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", certFile)
	pol, err := egress.NewPolicy(nil, nil, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := embedded.Start(context.Background(), embedded.Config{Root: sandboxtest.Dir(t), Egress: pol,
		Sandbox: sandbox.Config{Network: sandbox.NetworkHost}})
	if err != nil {
		t.Fatalf("start embedded executor: %v", err)
	}
	client, err := model.New(model.Config{APIKey: "test", BaseURL: fake.URL, Model: "claude-test", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model: client, Executor: executorClient(t, emb.Conn()), DefaultExecutor: "embedded",
		WebFetchModel: "claude-small-test", AbortGrace: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		orch.Close()
		emb.Close()
	})
	return orch, strings.Replace(srv.URL, "https://", "http://", 1) + "/changelog"
}

// An interrupt while the small model answers a WebFetch prompt ends the
// call with one interrupted tool_result, at once.
func TestWebFetchInterruptedWhileAnswering(t *testing.T) {
	fake := fakeapi.New(t)
	orch, url := webHarness(t, fake)
	answering := make(chan string, 1)
	fake.SetFallback(func(r *fakeapi.Request) fakeapi.Reply {
		if r.Body.Model == "claude-small-test" {
			answering <- r.Body.Messages[0].Text()
			<-r.Context().Done()
			return fakeapi.EndTurn(fakeapi.Text("never sent"))
		}
		if len(r.Body.Messages) == 1 {
			return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_fetch", "WebFetch", map[string]any{"url": url, "prompt": "What does version 3 remove?"}))
		}
		return fakeapi.EndTurn(fakeapi.Text("ok"))
	})
	s, err := orch.Create(context.Background(), "", bypass)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, _ := s.Run(context.Background(), "what changed?")
		done <- res
	}()
	var page string
	select {
	case page = <-answering:
	case <-time.After(30 * time.Second):
		t.Fatal("no small-model request")
	}
	if !strings.Contains(page, "# Changelog\n\nVersion 3 removes the old API.") || !strings.Contains(page, "What does version 3 remove?") {
		t.Errorf("small-model request: %q", page)
	}
	s.Interrupt("user pressed Esc")
	var res *orchestrator.TurnResult
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn did not end after the interrupt")
	}
	if res.StopReason != orchestrator.StopInterrupted {
		t.Fatalf("turn = %+v", res)
	}
	msgs := s.Messages()
	checkValid(t, msgs)
	results, order := toolResults(msgs[len(msgs)-1])
	r := results["toolu_fetch"]
	if len(order) != 1 || !isError(r) || !strings.HasPrefix(resultText(r), "<tool_use_error>Interrupted by the user") {
		t.Fatalf("tool_results %v: %+v", order, r)
	}
}

// A small model that fails gives the call an is_error result naming the
// failure; the conversation goes on.
func TestWebFetchAnswerFails(t *testing.T) {
	fake := fakeapi.New(t)
	orch, url := webHarness(t, fake)
	fake.Push(
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_fetch", "WebFetch", map[string]any{"url": url, "prompt": "Summarise."})),
		fakeapi.Reply{Status: http.StatusBadRequest, ErrorType: "invalid_request_error", ErrorMessage: "model not found"},
		fakeapi.EndTurn(fakeapi.Text("It could not be summarised.")),
	)
	s, err := orch.Create(context.Background(), "", bypass)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), "summarise the changelog")
	if err != nil || res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn %+v, %v", res, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || reqs[1].Body.Model != "claude-small-test" {
		t.Fatalf("%d requests; the second for model %q", len(reqs), reqs[1].Body.Model)
	}
	results, _ := toolResults(reqs[2].Body.Messages[len(reqs[2].Body.Messages)-1])
	r := results["toolu_fetch"]
	want := "WebFetch fetched the page, but answering the prompt about it failed: API Error: 400 invalid_request_error: model not found"
	if !isError(r) || resultText(r) != want {
		t.Fatalf("tool_result %+v, want the error %q", r, want)
	}
}
