package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/option"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, fake *fakeapi.Server, mod func(*model.Config)) *model.Client {
	t.Helper()
	cfg := model.Config{
		APIKey:         "test",
		BaseURL:        fake.URL,
		Model:          "claude-test",
		MaxRetries:     3,
		RetryBaseDelay: time.Millisecond,
		RetryMaxDelay:  5 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := model.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func userText(s string) []model.Message {
	return []model.Message{{Role: model.RoleUser, Content: []model.Block{model.TextBlock(s)}}}
}

type recorder struct{ events []model.Event }

func (r *recorder) on(e model.Event) { r.events = append(r.events, e) }

func (r *recorder) kinds(k model.EventKind) []model.Event {
	var out []model.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func TestNewWithoutCredentials(t *testing.T) {
	_, err := model.New(model.Config{})
	if !errors.Is(err, model.ErrNoCredentials) {
		t.Fatalf("New without key: %v, want ErrNoCredentials", err)
	}
	if got := err.Error(); !strings.Contains(got, "ANTHROPIC_API_KEY") || !strings.Contains(got, "ANTHROPIC_BASE_URL") {
		t.Fatalf("message %q does not say what to set", got)
	}
}

func TestStreamTextAndTools(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.ToolTurn(
		fakeapi.Thinking("let me look", "sig-1"),
		fakeapi.Text("Reading both files."),
		fakeapi.ToolUse("toolu_1", "Read", map[string]any{"file_path": "a.txt"}),
		fakeapi.ToolUse("toolu_2", "Read", `{"file_path": "b.txt"`), // cut-off JSON
	))
	c := newClient(t, fake, nil)
	var rec recorder
	resp, err := c.Stream(context.Background(), model.Request{Messages: userText("hi")}, rec.on)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Complete || resp.StopReason != model.StopToolUse || resp.ID != "msg_fake_0" {
		t.Fatalf("response = %+v", resp)
	}
	var text string
	for _, e := range rec.kinds(model.EventTextDelta) {
		text += e.Text
	}
	if text != "Reading both files." {
		t.Fatalf("text deltas = %q", text)
	}
	done := rec.kinds(model.EventBlockComplete)
	if len(done) != 4 {
		t.Fatalf("%d blocks completed, want 4", len(done))
	}
	if b := done[0].Block; b.Type != model.BlockThinking || b.Thinking != "let me look" || b.Signature != "sig-1" {
		t.Fatalf("thinking block = %+v", b)
	}
	if got := done[2]; got.Block.ID != "toolu_1" || got.RawInput != `{"file_path":"a.txt"}` || string(got.Block.Input) != `{"file_path":"a.txt"}` {
		t.Fatalf("tool_use 1 = %+v raw %q", got.Block, got.RawInput)
	}
	if got := done[3]; got.RawInput != `{"file_path": "b.txt"` || string(got.Block.Input) != `{}` {
		t.Fatalf("invalid tool input: raw %q, kept input %s", got.RawInput, got.Block.Input)
	}
	if len(resp.Content) != 4 || resp.Message().ToolUses()[1].ID != "toolu_2" {
		t.Fatalf("content = %+v", resp.Content)
	}
}

func TestRequestEncoding(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("ok")), fakeapi.EndTurn(fakeapi.Text("ok")))
	c := newClient(t, fake, func(cfg *model.Config) { cfg.ThinkingBudget = 1024; cfg.MaxTokens = 4096 })
	isErr := true
	msgs := []model.Message{
		{Role: model.RoleUser, Content: []model.Block{model.TextBlock("read it")}},
		{Role: model.RoleAssistant, Content: []model.Block{
			{Type: model.BlockToolUse, ID: "toolu_1", Name: "Read", Input: json.RawMessage(`{"file_path":"a"}`)},
			{Type: model.BlockToolUse, ID: "toolu_2", Name: "Read", Input: json.RawMessage(`{"file_path":"b.png"}`)},
			{Type: model.BlockToolUse, ID: "toolu_4", Name: "Read", Input: json.RawMessage(`{"file_path":"c.pdf"}`)},
			{Type: model.BlockToolUse, ID: "toolu_3", Name: "Bash", Input: json.RawMessage(`{"command":"false"}`)},
		}},
		{Role: model.RoleUser, Content: []model.Block{
			model.ToolResultBlock("toolu_1", []model.Block{model.TextBlock("1\tx")}, nil),
			model.ToolResultBlock("toolu_2", []model.Block{model.ImageBlock("image/png", "iVBO")}, nil),
			model.ToolResultBlock("toolu_4", []model.Block{model.TextBlock("c.pdf"), model.DocumentBlock("application/pdf", "JVBE")}, nil),
			model.ToolResultBlock("toolu_3", []model.Block{model.TextBlock("Exit code 1")}, &isErr),
		}},
	}
	tools := []model.Tool{
		{Name: "Bash", Description: "shell", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)},
		{Name: "Read", Description: "read", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	if _, err := c.Stream(context.Background(), model.Request{System: "be good", Tools: tools, Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	req := fake.Requests()[0]
	if req.Body.Model != "claude-test" || req.Body.MaxTokens != 4096 || !req.Body.Stream {
		t.Fatalf("body = %+v", req.Body)
	}
	if string(req.Body.Thinking) != `{"budget_tokens":1024,"type":"enabled"}` {
		t.Fatalf("thinking = %s", req.Body.Thinking)
	}
	if len(req.Body.System) != 1 || req.Body.System[0].Text != "be good" || string(req.Body.System[0].CacheControl) != `{"type":"ephemeral"}` {
		t.Fatalf("system = %+v", req.Body.System)
	}
	if req.Body.Tools[0].CacheControl != nil || string(req.Body.Tools[1].CacheControl) != `{"type":"ephemeral"}` {
		t.Fatalf("tool cache breakpoints: %s / %s", req.Body.Tools[0].CacheControl, req.Body.Tools[1].CacheControl)
	}
	// A tool marked as the breakpoint (the last built-in, before MCP
	// tools) takes the last tool's place.
	tools[0].CacheBreakpoint = true
	if _, err := c.Stream(context.Background(), model.Request{System: "be good", Tools: tools, Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	if r := fake.Requests()[1]; string(r.Body.Tools[0].CacheControl) != `{"type":"ephemeral"}` || r.Body.Tools[1].CacheControl != nil {
		t.Fatalf("marked tool cache breakpoints: %s / %s", r.Body.Tools[0].CacheControl, r.Body.Tools[1].CacheControl)
	}
	wantLast := []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\tx"},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBO"}},
		}},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_4", "content": []any{
			map[string]any{"type": "text", "text": "c.pdf"},
			map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
		}},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_3", "content": "Exit code 1", "is_error": true,
			"cache_control": map[string]any{"type": "ephemeral"}},
	}
	msgsJSON := req.JSON["messages"].([]any)
	gotLast := msgsJSON[2].(map[string]any)["content"]
	if !reflect.DeepEqual(gotLast, wantLast) {
		t.Fatalf("tool_result message:\n got %#v\nwant %#v", gotLast, wantLast)
	}
	// Only the newest message carries a breakpoint.
	first := msgsJSON[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	if _, ok := first["cache_control"]; ok {
		t.Fatalf("older message has cache_control: %v", first)
	}
	// The caller's messages are not modified by the breakpoint.
	if b, _ := json.Marshal(msgs[2].Content[2]); strings.Contains(string(b), "cache_control") {
		t.Fatalf("caller's block was modified: %s", b)
	}
}

// TestRequestBodyGoesWhole checks the body on the wire: every attempt of a
// request sends all of it, with its length (not chunked), however many
// messages it is made of; and a middleware of the caller's sees the body
// that is sent.
func TestRequestBodyGoesWhole(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.Overloaded(), fakeapi.EndTurn(fakeapi.Text("hi")))
	var seen [][]byte
	c := newClient(t, fake, func(cfg *model.Config) {
		cfg.Options = append(cfg.Options, option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			raw, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			seen = append(seen, raw)
			r.Body = io.NopCloser(bytes.NewReader(raw))
			return next(r)
		}))
	})
	var msgs []model.Message
	for i := range 40 {
		msgs = append(msgs,
			model.Message{Role: model.RoleUser, Content: []model.Block{model.TextBlock(fmt.Sprintf("turn %d: %s", i, strings.Repeat("x", 4000)))}},
			model.Message{Role: model.RoleAssistant, Content: []model.Block{model.TextBlock(fmt.Sprintf("answer %d", i))}})
	}
	msgs = append(msgs, userText("last")...)
	var encoded []json.RawMessage
	for _, m := range msgs[:len(msgs)/2] {
		raw, err := model.EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, raw)
	}
	if _, err := c.Stream(context.Background(), model.Request{Messages: msgs, Encoded: encoded}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (the first refused)", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(r.Raw)) {
			t.Errorf("request %d: Content-Length %q for a body of %d bytes", i, got, len(r.Raw))
		}
		var sent struct {
			Stream   bool              `json:"stream"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(r.Raw, &sent); err != nil || !sent.Stream || len(sent.Messages) != len(msgs) {
			t.Errorf("request %d: stream %v, %d messages (want %d), %v", i, sent.Stream, len(sent.Messages), len(msgs), err)
		}
	}
	if !bytes.Equal(reqs[0].Raw, reqs[1].Raw) {
		t.Errorf("the retry sent another body:\n%.200s\n%.200s", reqs[0].Raw, reqs[1].Raw)
	}
	if len(seen) != 2 || !bytes.Equal(seen[0], reqs[0].Raw) || !bytes.Equal(seen[1], reqs[1].Raw) {
		t.Errorf("the caller's middleware saw %d bodies, not the ones sent (first %.100s)", len(seen), bytes.Join(seen, []byte(" | ")))
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name        string
		replies     []fakeapi.Reply
		wantErrType string // empty: success
		wantRetries int
		wantReqs    int
	}{
		{"529 then success", []fakeapi.Reply{fakeapi.Overloaded(), fakeapi.EndTurn(fakeapi.Text("hi"))}, "", 1, 2},
		{"429 twice then success", []fakeapi.Reply{fakeapi.RateLimited(), fakeapi.RateLimited(), fakeapi.EndTurn(fakeapi.Text("hi"))}, "", 2, 3},
		{"500 then success", []fakeapi.Reply{fakeapi.ServerError(), fakeapi.EndTurn(fakeapi.Text("hi"))}, "", 1, 2},
		{"cut before any block then success", []fakeapi.Reply{fakeapi.Cut(0), fakeapi.EndTurn(fakeapi.Text("hi"))}, "", 1, 2},
		{"529 persists", []fakeapi.Reply{fakeapi.Overloaded(), fakeapi.Overloaded(), fakeapi.Overloaded(), fakeapi.Overloaded()}, "overloaded_error", 3, 4},
		{"400 is not retried", []fakeapi.Reply{{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "bad"}}, "invalid_request_error", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakeapi.New(t, tt.replies...)
			c := newClient(t, fake, nil)
			var rec recorder
			resp, err := c.Stream(context.Background(), model.Request{Messages: userText("hi")}, rec.on)
			if tt.wantErrType == "" {
				if err != nil || resp.Message().Text() != "hi" {
					t.Fatalf("Stream = %+v, %v", resp, err)
				}
			} else {
				var ae *model.APIError
				if !errors.As(err, &ae) || ae.Type != tt.wantErrType {
					t.Fatalf("error = %v, want API error %s", err, tt.wantErrType)
				}
				if resp != nil {
					t.Fatalf("failed request returned a response: %+v", resp)
				}
			}
			retries := rec.kinds(model.EventRetry)
			if len(retries) != tt.wantRetries {
				t.Fatalf("%d retry events, want %d", len(retries), tt.wantRetries)
			}
			for i, r := range retries {
				if r.Retry.Attempt != i+1 || r.Retry.MaxRetries != 3 || r.Retry.Delay <= 0 || r.Retry.Err == nil {
					t.Fatalf("retry %d = %+v", i, r.Retry)
				}
			}
			reqs := fake.Requests()
			if len(reqs) != tt.wantReqs {
				t.Fatalf("%d requests, want %d", len(reqs), tt.wantReqs)
			}
			for _, r := range reqs[1:] {
				if !reflect.DeepEqual(r.JSON, reqs[0].JSON) {
					t.Fatalf("retried request differs:\n%s\n%s", reqs[0].Raw, r.Raw)
				}
			}
		})
	}
}

func TestStreamCutKeepsCompleteBlocks(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.Cut(2,
		fakeapi.ToolUse("toolu_1", "Bash", map[string]any{"command": "echo 1"}),
		fakeapi.ToolUse("toolu_2", "Read", map[string]any{"file_path": "x"}),
		fakeapi.ToolUse("toolu_3", "Read", map[string]any{"file_path": "never"}),
	))
	c := newClient(t, fake, nil)
	var rec recorder
	resp, err := c.Stream(context.Background(), model.Request{Messages: userText("go")}, rec.on)
	if !errors.Is(err, model.ErrStreamCut) {
		t.Fatalf("error = %v, want ErrStreamCut", err)
	}
	if resp == nil || resp.Complete {
		t.Fatalf("response = %+v", resp)
	}
	uses := resp.Message().ToolUses()
	if len(uses) != 2 || uses[0].ID != "toolu_1" || uses[1].ID != "toolu_2" {
		t.Fatalf("kept tool uses = %+v", uses)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("a cut mid-message was retried: %d requests", n)
	}
	if len(rec.kinds(model.EventRetry)) != 0 {
		t.Fatal("retry reported for a cut mid-message")
	}
}

func TestErrorEventMidStream(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.Reply{Message: fakeapi.Turn{
		Blocks:     []fakeapi.Block{fakeapi.Text("partial"), fakeapi.Text("never")},
		ErrorEvent: "overloaded_error", CutAfter: 1,
	}})
	c := newClient(t, fake, nil)
	resp, err := c.Stream(context.Background(), model.Request{Messages: userText("go")}, nil)
	var ae *model.APIError
	if !errors.As(err, &ae) || ae.Type != "overloaded_error" {
		t.Fatalf("error = %v", err)
	}
	if resp == nil || resp.Message().Text() != "partial" {
		t.Fatalf("response = %+v", resp)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestStreamCanceled(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	b := fakeapi.Text("never")
	b.Wait = gate
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("first"), b))
	c := newClient(t, fake, nil)
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Stream(ctx, model.Request{Messages: userText("go")}, func(e model.Event) {
		if e.Kind == model.EventBlockComplete {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if resp == nil || resp.Message().Text() != "first" {
		t.Fatalf("response = %+v", resp)
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	b := fakeapi.Text("late")
	b.Wait = gate
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("first"), b))
	c := newClient(t, fake, func(cfg *model.Config) { cfg.StreamIdleTimeout = 50 * time.Millisecond })
	resp, err := c.Stream(context.Background(), model.Request{Messages: userText("go")}, nil)
	if !errors.Is(err, model.ErrStreamCut) {
		t.Fatalf("error = %v, want ErrStreamCut", err)
	}
	if resp == nil || resp.Message().Text() != "first" {
		t.Fatalf("response = %+v", resp)
	}
}

func TestThinkingBudgetMustBeBelowMaxTokens(t *testing.T) {
	fake := fakeapi.New(t)
	c := newClient(t, fake, nil)
	_, err := c.Stream(context.Background(), model.Request{Messages: userText("x"), MaxTokens: 1000, ThinkingBudget: 1000}, nil)
	if err == nil {
		t.Fatal("no error for a thinking budget as large as max_tokens")
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("request sent anyway")
	}
}

func TestConfigFromEnvModel(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_MODEL": " claude-from-env "}
	cfg := model.ConfigFromEnv(func(k string) string { return env[k] })
	if cfg.Model != "claude-from-env" {
		t.Fatalf("model from ANTHROPIC_MODEL = %q", cfg.Model)
	}
	delete(env, "ANTHROPIC_MODEL")
	c, err := model.New(model.ConfigFromEnv(func(k string) string { return env[k] }))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model() != model.DefaultModel || model.DefaultModel != "claude-sonnet-5-5" {
		t.Fatalf("model without ANTHROPIC_MODEL = %q (default %q)", c.Model(), model.DefaultModel)
	}
}
