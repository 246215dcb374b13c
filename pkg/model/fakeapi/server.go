package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolwire/toolwire/pkg/model"
)

// Request is one request the server received.
type Request struct {
	// Index counts requests from 0.
	Index int
	// Received is when the request arrived.
	Received time.Time
	// Finished is when the last event of its streamed reply (message_stop)
	// was sent; zero for error replies and cut streams.
	Finished time.Time
	// Header holds the HTTP headers.
	Header http.Header
	// Raw is the request body.
	Raw []byte
	// Body is the decoded body.
	Body Body
	// JSON is the body decoded into generic maps, for assertions on fields
	// Body does not name.
	JSON map[string]any

	ctx context.Context
}

// Context is the request's context: done when the client went away or the
// server closes.
func (r *Request) Context() context.Context { return r.ctx }

// Body is a decoded Messages API request.
type Body struct {
	// Model is the requested model.
	Model string `json:"model"`
	// MaxTokens is the output limit.
	MaxTokens int `json:"max_tokens"`
	// Stream is true for streaming requests.
	Stream bool `json:"stream"`
	// System is the system prompt.
	System []SystemBlock `json:"system"`
	// Tools are the offered tools, in order.
	Tools []ToolDef `json:"tools"`
	// Messages is the conversation.
	Messages []model.Message `json:"messages"`
	// Thinking is the thinking configuration, as sent.
	Thinking json.RawMessage `json:"thinking"`
}

// SystemBlock is one block of the system prompt.
type SystemBlock struct {
	// Type is "text".
	Type string `json:"type"`
	// Text is the prompt.
	Text string `json:"text"`
	// CacheControl is the block's cache_control, as sent.
	CacheControl json.RawMessage `json:"cache_control"`
}

// ToolDef is one offered tool.
type ToolDef struct {
	// Type is empty for a client tool, the server tool's version for a
	// tool the API runs ("web_search_20250305").
	Type string `json:"type"`
	// Name of the tool.
	Name string `json:"name"`
	// Description of the tool.
	Description string `json:"description"`
	// InputSchema is its JSON Schema.
	InputSchema json.RawMessage `json:"input_schema"`
	// CacheControl is the tool's cache_control, as sent.
	CacheControl json.RawMessage `json:"cache_control"`
	// MaxUses, AllowedDomains and BlockedDomains are a web search tool's
	// settings, as sent.
	MaxUses        int      `json:"max_uses"`
	AllowedDomains []string `json:"allowed_domains"`
	BlockedDomains []string `json:"blocked_domains"`
}

// Server is a scripted fake of the Anthropic Messages API: a real HTTP
// server on loopback that answers POST /v1/messages by replaying scripted
// replies as server-sent events, exactly in the API's event format.
type Server struct {
	// URL is the base URL to give the SDK (option.WithBaseURL or
	// ANTHROPIC_BASE_URL).
	URL string

	srv      *http.Server
	handlers sync.WaitGroup
	done     chan struct{}

	mu       sync.Mutex // guards the fields below
	script   []Responder
	fallback Responder
	requests []*Request
	// forgotten counts the requests dropped by Forget.
	forgotten int
	errs      []error
	arrived   chan struct{} // closed and replaced on every request
	shallow   bool
}

// Start starts a server on 127.0.0.1 with an empty script.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeapi: listen: %w", err)
	}
	s := &Server{
		URL:     "http://" + ln.Addr().String(),
		done:    make(chan struct{}),
		arrived: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(noDelayListener{ln})
	return s, nil
}

// New starts a server for a test and closes it when the test ends. The
// script is given by replies; more can be added with Push and PushFunc.
func New(tb testing.TB, replies ...Reply) *Server {
	tb.Helper()
	s, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	s.Push(replies...)
	return s
}

// Close stops the server, breaking open streams, and waits for its handlers.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
	}
	close(s.done)
	s.mu.Unlock()
	s.srv.Close()
	s.handlers.Wait()
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	for _, r := range replies {
		s.PushFunc(Static(r))
	}
}

// PushFunc appends responders to the script: each answers one request.
func (s *Server) PushFunc(rs ...Responder) {
	s.mu.Lock()
	s.script = append(s.script, rs...)
	s.mu.Unlock()
}

// SetFallback sets the responder for requests that arrive when the script
// is empty. Without one, such requests get a 400 error and are recorded in
// Errors.
func (s *Server) SetFallback(r Responder) {
	s.mu.Lock()
	s.fallback = r
	s.mu.Unlock()
}

// SetShallow turns the decoding of requests off (on is the default): Body
// then holds only Model and Stream, JSON is nil, and responders and tests
// read Raw (with gjson, which finds a field without decoding the rest). For
// benchmarks of long conversations, in which decoding each request's
// history would cost the fake more than the client it serves.
func (s *Server) SetShallow(on bool) {
	s.mu.Lock()
	s.shallow = on
	s.mu.Unlock()
}

// Requests returns copies of the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Request, len(s.requests))
	for i, r := range s.requests {
		c := *r
		out[i] = &c
	}
	return out
}

// Forget drops the requests recorded so far, so that a long run (a
// benchmark of hundreds of turns) does not keep every body it was sent.
// Requests then returns only the requests that arrive later; Index and
// WaitRequests go on counting from where they were.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten += len(s.requests)
	s.requests = nil
}

// Remaining returns how many scripted replies are still unused.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Errors returns what went wrong on the server side: malformed requests,
// requests beyond the script.
func (s *Server) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// WaitRequests blocks until n requests arrived or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]*Request, error) {
	for {
		s.mu.Lock()
		count, arrived := s.forgotten+len(s.requests), s.arrived
		s.mu.Unlock()
		if count >= n {
			return s.Requests(), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fakeapi: %d of %d requests arrived: %w", count, n, ctx.Err())
		case <-arrived:
		}
	}
}

func (s *Server) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "api_error", "fakeapi: closed")
		return
	default:
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()
	if hr.Method != http.MethodPost || hr.URL.Path != "/v1/messages" {
		s.fail(fmt.Errorf("fakeapi: unexpected %s %s", hr.Method, hr.URL.Path))
		writeError(w, http.StatusNotFound, "not_found_error", "no such endpoint in the fake")
		return
	}
	raw, err := readBody(hr)
	if err != nil {
		s.fail(fmt.Errorf("fakeapi: read body: %w", err))
		return
	}
	ctx, cancel := context.WithCancel(hr.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req := &Request{Received: time.Now(), Header: hr.Header.Clone(), Raw: raw, ctx: ctx}
	s.mu.Lock()
	shallow := s.shallow
	s.mu.Unlock()
	switch {
	case shallow:
		if !gjson.ValidBytes(raw) {
			s.fail(errors.New("fakeapi: decode request: not JSON"))
		}
		req.Body.Model, req.Body.Stream = gjson.GetBytes(raw, "model").String(), gjson.GetBytes(raw, "stream").Bool()
	default:
		if err := json.Unmarshal(raw, &req.Body); err != nil {
			s.fail(fmt.Errorf("fakeapi: decode request: %w", err))
		}
		if err := json.Unmarshal(raw, &req.JSON); err != nil {
			s.fail(fmt.Errorf("fakeapi: decode request: %w", err))
		}
	}

	s.mu.Lock()
	req.Index = s.forgotten + len(s.requests)
	s.requests = append(s.requests, req)
	close(s.arrived)
	s.arrived = make(chan struct{})
	var respond Responder
	if len(s.script) > 0 {
		respond, s.script = s.script[0], s.script[1:]
	} else {
		respond = s.fallback
	}
	s.mu.Unlock()

	if respond == nil {
		s.fail(fmt.Errorf("%w: request %d arrived after the last scripted reply", ErrScriptExhausted, req.Index))
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fakeapi: script exhausted")
		return
	}
	reply := respond(req)
	if reply.Status != 0 {
		if reply.RetryAfter != "" {
			w.Header().Set("retry-after", reply.RetryAfter)
		}
		writeError(w, reply.Status, reply.ErrorType, reply.ErrorMessage)
		return
	}
	if !req.Body.Stream {
		s.fail(fmt.Errorf("fakeapi: request %d is not streaming", req.Index))
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fakeapi: only streaming requests are scripted")
		return
	}
	if streamTurn(ctx, w, req, reply.Message) {
		s.mu.Lock()
		req.Finished = time.Now()
		s.mu.Unlock()
	}
}

// maxSizedBody is the largest Content-Length readBody allocates for at
// once.
const maxSizedBody = 64 << 20

// readBody reads a request's body whole: into one buffer of its length when
// the client sent one, as a server does (io.ReadAll would grow its buffer
// from 512 bytes, copying a long conversation's body a dozen times).
func readBody(hr *http.Request) ([]byte, error) {
	if n := hr.ContentLength; n > 0 && n <= maxSizedBody {
		raw := make([]byte, n)
		if _, err := io.ReadFull(hr.Body, raw); err != nil {
			return nil, err
		}
		return raw, nil
	}
	return io.ReadAll(hr.Body)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": typ, "message": msg},
		"request_id": "req_fake",
	})
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w     http.ResponseWriter
	flush func()
	buf   bytes.Buffer
}

func (e *sse) send(event string, data any) {
	payload, err := json.Marshal(data)
	if err != nil {
		panic("fakeapi: event does not encode: " + err.Error())
	}
	e.buf.Reset()
	e.buf.WriteString("event: ")
	e.buf.WriteString(event)
	e.buf.WriteString("\ndata: ")
	e.buf.Write(payload)
	e.buf.WriteString("\n\n")
	_, _ = e.w.Write(e.buf.Bytes())
	e.flush()
}

type obj = map[string]any

// streamTurn streams t and reports whether it sent the whole message.
func streamTurn(ctx context.Context, w http.ResponseWriter, req *Request, t Turn) bool {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, flush: func() {
		if flusher != nil {
			flusher.Flush()
		}
	}}

	id := t.ID
	if id == "" {
		id = fmt.Sprintf("msg_fake_%d", req.Index)
	}
	usage := t.Usage
	if usage == (model.Usage{}) {
		usage = model.Usage{InputTokens: 100, OutputTokens: 20}
	}
	modelName := req.Body.Model
	e.send("message_start", obj{"type": "message_start", "message": obj{
		"id": id, "type": "message", "role": "assistant", "model": modelName,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{
			"input_tokens": usage.InputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": usage.CacheCreationInputTokens,
			"cache_read_input_tokens":     usage.CacheReadInputTokens,
		},
	}})
	e.send("ping", obj{"type": "ping"})

	stopReason := t.StopReason
	for i, b := range t.Blocks {
		if b.Type == "tool_use" && stopReason == "" {
			stopReason = "tool_use"
		}
		if !wait(ctx, b.Pause, b.Wait) {
			return false
		}
		if t.ErrorEvent != "" && i == t.CutAfter {
			e.send("error", obj{"type": "error", "error": obj{"type": t.ErrorEvent, "message": "fakeapi: scripted error event"}})
			return false
		}
		half := t.Cut && i == t.CutAfter
		streamBlock(e, i, b, half)
		if half {
			// Break the connection without finishing the chunked body.
			panic(http.ErrAbortHandler)
		}
	}
	if t.Cut && t.CutAfter >= len(t.Blocks) {
		panic(http.ErrAbortHandler)
	}
	if t.ErrorEvent != "" {
		e.send("error", obj{"type": "error", "error": obj{"type": t.ErrorEvent, "message": "fakeapi: scripted error event"}})
		return false
	}
	if stopReason == "" {
		stopReason = "end_turn"
	}
	if !wait(ctx, 0, t.WaitBeforeStop) {
		return false
	}
	e.send("message_delta", obj{
		"type":  "message_delta",
		"delta": obj{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": obj{"output_tokens": usage.OutputTokens},
	})
	e.send("message_stop", obj{"type": "message_stop"})
	return true
}

func wait(ctx context.Context, pause time.Duration, gate <-chan struct{}) bool {
	if pause > 0 {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	if gate != nil {
		select {
		case <-ctx.Done():
			return false
		case <-gate:
		}
	}
	return true
}

// streamBlock sends one block: start, deltas in pieces, stop. With half set
// it stops after the first half of the deltas.
func streamBlock(e *sse, index int, b Block, half bool) {
	var start obj
	var deltas []obj
	switch b.Type {
	case "text":
		start = obj{"type": "text", "text": ""}
		for _, p := range pieces(b.Text, 3) {
			deltas = append(deltas, obj{"type": "text_delta", "text": p})
		}
	case "thinking":
		start = obj{"type": "thinking", "thinking": "", "signature": ""}
		for _, p := range pieces(b.Thinking, 2) {
			deltas = append(deltas, obj{"type": "thinking_delta", "thinking": p})
		}
		deltas = append(deltas, obj{"type": "signature_delta", "signature": b.Signature})
	case "tool_use":
		start = obj{"type": "tool_use", "id": b.ID, "name": b.Name, "input": obj{}}
		deltas = append(deltas, obj{"type": "input_json_delta", "partial_json": ""})
		for _, p := range pieces(b.Input, 3) {
			deltas = append(deltas, obj{"type": "input_json_delta", "partial_json": p})
		}
	case "server_tool_use":
		start = obj{"type": "server_tool_use", "id": b.ID, "name": b.Name, "input": obj{}}
		for _, p := range pieces(b.Input, 2) {
			deltas = append(deltas, obj{"type": "input_json_delta", "partial_json": p})
		}
	default:
		if len(b.Raw) == 0 {
			panic("fakeapi: unknown block type " + b.Type + " without Raw")
		}
		start = obj{}
		if err := json.Unmarshal(b.Raw, &start); err != nil {
			panic("fakeapi: Raw of a " + b.Type + " block is not a JSON object: " + err.Error())
		}
	}
	e.send("content_block_start", obj{"type": "content_block_start", "index": index, "content_block": start})
	if half {
		deltas = deltas[:(len(deltas)+1)/2]
	}
	for _, d := range deltas {
		e.send("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": d})
	}
	if half {
		return
	}
	e.send("content_block_stop", obj{"type": "content_block_stop", "index": index})
}

// pieces splits s into at most n parts of about equal size, on rune
// boundaries.
func pieces(s string, n int) []string {
	r := []rune(s)
	if len(r) == 0 {
		return nil
	}
	size := (len(r) + n - 1) / n
	var out []string
	for len(r) > 0 {
		k := min(size, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// noDelayListener turns Nagle's algorithm off on every accepted connection,
// so small SSE events leave at once rather than after a delayed ACK.
type noDelayListener struct{ net.Listener }

// Accept returns the next connection with TCP_NODELAY set.
func (l noDelayListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			c.Close()
			return nil, fmt.Errorf("fakeapi: set TCP_NODELAY: %w", err)
		}
	}
	return c, nil
}

// ErrScriptExhausted is what a request beyond the script is answered with.
var ErrScriptExhausted = errors.New("fakeapi: script exhausted")
