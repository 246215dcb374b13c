package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/tool"
)

// exampleBin is the example MCP server (examples/mcp/server), built once.
var exampleBin string

func TestMain(m *testing.M) {
	if err := sandbox.BecomeSubreaper(); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "mcpclient-test-")
	if err != nil {
		panic(err)
	}
	// The sandbox user must reach the binary.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	exampleBin = filepath.Join(dir, "example-mcp")
	if out, err := exec.Command("go", "build", "-o", exampleBin, "../../examples/mcp/server").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the example server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := sandboxtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// env returns a session environment with a sandbox runner (Landlock,
// network "none") that may run the example server.
func env(t *testing.T) *tool.Env {
	t.Helper()
	ws := sandboxtest.Dir(t)
	tmp := t.TempDir()
	r, err := sandbox.NewRunner(sandbox.Config{
		Backend:       sandbox.BackendLandlock,
		Network:       sandbox.NetworkNone,
		ReadOnlyPaths: readOnlyPaths(),
	}, ws, tmp)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "outputs")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	e := &tool.Env{SessionID: "s", Procs: r, TempDir: tmp, OutputDir: out, Limits: tool.Limits{}.WithDefaults()}
	t.Cleanup(r.Close)
	return e
}

// readOnlyPaths are the sandbox's default read-only paths that exist here,
// and the example server's directory.
func readOnlyPaths() []string {
	var out []string
	for _, p := range sandbox.DefaultReadOnlyPaths() {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return append(out, filepath.Dir(exampleBin))
}

func stdio(args ...string) mcpclient.ServerConfig {
	return mcpclient.ServerConfig{Command: exampleBin, Args: args}
}

// start starts a set of session servers in e and closes it at the end.
func start(t *testing.T, e *tool.Env, servers mcpclient.Servers, tune func(*mcpclient.Options)) *mcpclient.Set {
	t.Helper()
	opts := mcpclient.Options{Session: servers, Procs: e.Procs, Network: sandbox.NetworkNone}
	if tune != nil {
		tune(&opts)
	}
	s := mcpclient.Start(context.Background(), opts)
	t.Cleanup(s.Close)
	return s
}

func find(t *testing.T, s *mcpclient.Set, name string) tool.Tool {
	t.Helper()
	var names []string
	for _, tl := range s.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
		names = append(names, tl.Spec().Name)
	}
	t.Fatalf("no tool %s among %v (status %+v)", name, names, s.Status())
	return nil
}

func run(t *testing.T, ctx context.Context, e *tool.Env, tl tool.Tool, id, input string, progress func(tool.Progress)) *tool.Result {
	t.Helper()
	if progress == nil {
		progress = func(tool.Progress) {}
	}
	return tl.Run(ctx, e, &tool.Call{ID: id, Name: tl.Spec().Name, Input: json.RawMessage(input), Progress: progress})
}

func TestListAndCall(t *testing.T) {
	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex.ample": stdio()}, nil)
	st := s.Status()
	if len(st) != 1 || st[0].State != mcpclient.StateConnected || st[0].ServerName != "toolwire-example" || st[0].Transport != "stdio" {
		t.Fatalf("status = %+v", st)
	}
	var names []string
	for _, tl := range s.Tools() {
		names = append(names, tl.Spec().Name)
	}
	want := "mcp__ex_ample__add mcp__ex_ample__big mcp__ex_ample__crash mcp__ex_ample__echo mcp__ex_ample__fail mcp__ex_ample__grow mcp__ex_ample__image mcp__ex_ample__meta mcp__ex_ample__probe mcp__ex_ample__slow"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("tools:\n got %s\nwant %s", got, want)
	}
	echo := find(t, s, "mcp__ex_ample__echo")
	if sp := echo.Spec(); sp.Concurrency != tool.ConcurrencyAlways || sp.ReadOnly || !strings.Contains(string(sp.InputSchema), `"text"`) || sp.Description != "Returns the text it is given." {
		t.Fatalf("echo spec = %+v", sp)
	}
	if c := find(t, s, "mcp__ex_ample__add").Spec().Concurrency; c != tool.ConcurrencyNever {
		t.Fatalf("add concurrency = %v, want never (not annotated read-only)", c)
	}
	ctx := context.Background()
	if r := run(t, ctx, e, echo, "toolu_1", `{"text":"hello"}`, nil); r.IsError || r.TextContent() != "hello" {
		t.Fatalf("echo = %+v", r)
	}
	r := run(t, ctx, e, find(t, s, "mcp__ex_ample__add"), "toolu_2", `{"a":2,"b":40}`, nil)
	if r.IsError || string(r.Structured) != `{"sum":42}` || r.TextContent() != `{"sum":42}` {
		t.Fatalf("add = %+v (structured %s)", r, r.Structured)
	}
	r = run(t, ctx, e, find(t, s, "mcp__ex_ample__fail"), "toolu_3", `{"message":"it broke"}`, nil)
	if !r.IsError || r.FinalOutcome() != tool.OutcomeToolError || r.TextContent() != "it broke" {
		t.Fatalf("fail = %+v", r)
	}
	r = run(t, ctx, e, find(t, s, "mcp__ex_ample__image"), "toolu_4", `{}`, nil)
	if len(r.Content) != 3 || r.Content[0].Text != "a red dot:" || r.Content[1].MediaType != "image/png" || len(r.Content[1].Data) == 0 || r.Content[2].Text != "resource text" {
		t.Fatalf("image = %+v", r.Content)
	}
	// A call the server refuses (arguments against its schema) is an
	// error result; the server stays connected.
	r = run(t, ctx, e, find(t, s, "mcp__ex_ample__add"), "toolu_5", `{"a":"x"}`, nil)
	if !r.IsError || !strings.Contains(r.TextContent(), `validating /properties/a`) {
		t.Fatalf("bad arguments = %+v", r)
	}
	if st := s.Status()[0]; st.State != mcpclient.StateConnected {
		t.Fatalf("after a refused call: %+v", st)
	}
}

func TestProgressAndCancel(t *testing.T) {
	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, nil)
	slow := find(t, s, "mcp__ex__slow")
	var lines []string
	r := run(t, context.Background(), e, slow, "toolu_p", `{"steps":3,"delay_ms":100}`, func(p tool.Progress) { lines = append(lines, string(p.Output)) })
	if r.IsError || r.TextContent() != "counted 3 steps" {
		t.Fatalf("slow = %+v", r)
	}
	// Notifications that arrive after the result are dropped.
	if got := strings.Join(lines, ""); !strings.HasPrefix(got, "[1/3] step 1\n") || !strings.HasPrefix("[1/3] step 1\n[2/3] step 2\n[3/3] step 3\n", got) {
		t.Fatalf("progress = %q", got)
	}

	// Cancel after the first progress: the server hears of it
	// (notifications/cancelled), and writes its marker.
	marker := filepath.Join(e.Procs.Workspace(), "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	r = run(t, ctx, e, slow, "toolu_c", fmt.Sprintf(`{"steps":1000,"delay_ms":20,"marker":%q}`, marker), func(tool.Progress) { cancel() })
	if r.FinalOutcome() != tool.OutcomeInterrupted {
		t.Fatalf("cancelled slow = %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(marker); err == nil && strings.HasPrefix(string(b), "cancelled at step") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never saw the cancellation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The server goes on serving.
	if r := run(t, context.Background(), e, find(t, s, "mcp__ex__echo"), "toolu_after", `{"text":"still here"}`, nil); r.TextContent() != "still here" {
		t.Fatalf("echo after cancel = %+v", r)
	}
}

func TestCallTimeout(t *testing.T) {
	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, nil)
	r := find(t, s, "mcp__ex__slow").Run(context.Background(), e, &tool.Call{ID: "toolu_t", Input: json.RawMessage(`{"steps":1000}`),
		Timeout: 200 * time.Millisecond, Progress: func(tool.Progress) {}})
	if r.FinalOutcome() != tool.OutcomeTimeout || !strings.Contains(r.TextContent(), "timed out after 200ms") {
		t.Fatalf("timed out call = %+v", r)
	}
}

func TestCrashAndRestart(t *testing.T) {
	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, nil)
	r := run(t, context.Background(), e, find(t, s, "mcp__ex__crash"), "toolu_crash", `{"code":3}`, nil)
	if !r.IsError || !strings.Contains(r.TextContent(), `The MCP server "ex" stopped during the call: the server exited with code 3`) ||
		!strings.Contains(r.TextContent(), "crashing with exit code 3") {
		t.Fatalf("crash = %+v", r)
	}
	if st := s.Status()[0]; st.State != mcpclient.StateDisconnected || st.Tools == 0 {
		t.Fatalf("after the crash: %+v", st)
	}
	r = run(t, context.Background(), e, find(t, s, "mcp__ex__echo"), "toolu_again", `{"text":"back"}`, nil)
	if r.IsError || r.TextContent() != "back" {
		t.Fatalf("echo after restart = %+v", r)
	}
	if st := s.Status()[0]; st.State != mcpclient.StateConnected {
		t.Fatalf("after the restart: %+v", st)
	}
}

func TestFailuresAreReported(t *testing.T) {
	e := env(t)
	begin := time.Now()
	s := start(t, e, mcpclient.Servers{
		"hang":     stdio("-hang"),
		"good":     stdio(),
		"nocmd":    {Args: []string{"x"}},
		"missing":  {Command: "/nonexistent/server"},
		"badtype":  {Type: "carrier-pigeon", URL: "http://127.0.0.1:1"},
		"far":      {Type: "http", URL: "http://192.0.2.1/mcp"},
		"operator": stdio(),
		"good.":    stdio(),
		"good_":    stdio(),
	}, func(o *mcpclient.Options) {
		o.StartTimeout = time.Second
		o.Operator = mcpclient.Servers{"operator": stdio()}
	})
	if d := time.Since(begin); d > 20*time.Second {
		t.Fatalf("Start took %s", d)
	}
	got := map[string]mcpclient.ServerStatus{}
	for _, st := range s.Status() {
		got[st.Name+map[bool]string{true: "/op"}[st.Operator]] = st
	}
	wantErr := map[string]string{
		"hang":     "no answer to initialize and tools/list within 1s",
		"nocmd":    `a stdio server needs a "command"`,
		"missing":  "/nonexistent/server",
		"badtype":  `unknown "type" "carrier-pigeon"`,
		"far":      `may only be reached on loopback`,
		"operator": "a session cannot replace it",
		"good_":    `would be the same as those of server "good."`,
	}
	for name, frag := range wantErr {
		st := got[name]
		if st.State != mcpclient.StateFailed || !strings.Contains(st.Error, frag) || st.Tools != 0 {
			t.Errorf("%s: %+v, want failed with %q", name, st, frag)
		}
	}
	for _, name := range []string{"good", "good.", "operator/op"} {
		if st := got[name]; st.State != mcpclient.StateConnected || st.Tools == 0 {
			t.Errorf("%s: %+v, want connected", name, st)
		}
	}
}

func TestListChanged(t *testing.T) {
	e := env(t)
	var changes atomic.Int32
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, func(o *mcpclient.Options) { o.OnChange = func() { changes.Add(1) } })
	if r := run(t, context.Background(), e, find(t, s, "mcp__ex__grow"), "toolu_g", `{}`, nil); r.IsError {
		t.Fatalf("grow = %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for changes.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("OnChange was not called")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := run(t, context.Background(), e, find(t, s, "mcp__ex__late"), "toolu_l", `{}`, nil); r.TextContent() != "late tool ran" {
		t.Fatalf("late = %+v", r)
	}
}

func TestOutputCap(t *testing.T) {
	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, func(o *mcpclient.Options) { o.MaxOutputTokens = 100 })
	r := run(t, context.Background(), e, find(t, s, "mcp__ex__big"), "toolu_big", `{"chars":1000}`, nil)
	if r.IsError || r.Truncation == nil || len(r.Content) != 2 || len([]rune(r.Content[0].Text)) != 400 {
		t.Fatalf("big = %+v", r)
	}
	path := r.Truncation.FullOutputPath
	note := r.Content[1].Text
	if !strings.Contains(note, "returned 1000 characters, more than its limit of 100 tokens") || !strings.Contains(note, path) {
		t.Fatalf("note = %q", note)
	}
	full, err := os.ReadFile(path)
	if err != nil || len(full) != 1000 || !strings.HasPrefix(string(full), r.Content[0].Text) {
		t.Fatalf("saved output: %d bytes, %v", len(full), err)
	}
	if r.Truncation.OriginalBytes != 1000 || r.Truncation.OmittedBytes != 600 {
		t.Fatalf("truncation = %+v", r.Truncation)
	}
}

func TestTraceContextInMeta(t *testing.T) {
	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, nil)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	r := run(t, ctx, e, find(t, s, "mcp__ex__meta"), "toolu_m", `{}`, nil)
	var meta map[string]any
	if err := json.Unmarshal([]byte(r.TextContent()), &meta); err != nil {
		t.Fatalf("meta = %q: %v", r.TextContent(), err)
	}
	if tp, _ := meta["traceparent"].(string); !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Fatalf("traceparent = %v (meta %v)", meta["traceparent"], meta)
	}
	if meta["progressToken"] != "toolu_m" {
		t.Fatalf("progressToken = %v", meta["progressToken"])
	}
}

// httpServer serves an in-process MCP server over streamable HTTP on
// loopback; requests must carry the header X-Token: secret.
func httpServer(t *testing.T) string {
	t.Helper()
	url, _ := httpServerStoppable(t)
	return url
}

// httpServerStoppable is httpServer, with a function that stops it.
func httpServerStoppable(t *testing.T) (string, func()) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "http-test", Version: "0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello over http"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "secret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go hs.Serve(lis)
	t.Cleanup(func() { hs.Close() })
	return "http://" + lis.Addr().String() + "/mcp", func() { hs.Close() }
}

func TestHTTPServer(t *testing.T) {
	e := env(t)
	url := httpServer(t)
	s := start(t, e, mcpclient.Servers{
		"web":     {Type: "http", URL: url, Headers: map[string]string{"X-Token": "secret"}},
		"notoken": {Type: "http", URL: url},
	}, func(o *mcpclient.Options) { o.StartTimeout = 5 * time.Second })
	r := run(t, context.Background(), e, find(t, s, "mcp__web__hello"), "toolu_h", `{}`, nil)
	if r.IsError || r.TextContent() != "hello over http" {
		t.Fatalf("hello = %+v", r)
	}
	for _, st := range s.Status() {
		if st.Name == "notoken" && (st.State != mcpclient.StateFailed || !strings.Contains(st.Error, "Unauthorized")) {
			t.Errorf("notoken: %+v", st)
		}
		if st.Name == "web" && (st.State != mcpclient.StateConnected || st.Transport != "http") {
			t.Errorf("web: %+v", st)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "abc", "HOST": "127.0.0.1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := mcpclient.ServerConfig{Type: "http", URL: "http://${HOST}:${PORT:-8080}/mcp", Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}.Expand(lookup)
	if err != nil || c.URL != "http://127.0.0.1:8080/mcp" || c.Headers["Authorization"] != "Bearer abc" {
		t.Fatalf("expand = %+v, %v", c, err)
	}
	if _, err := (mcpclient.ServerConfig{Command: "${NOPE}"}).Expand(lookup); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("missing variable: %v", err)
	}
}

func TestParse(t *testing.T) {
	s, err := mcpclient.Parse([]byte(`{"mcpServers":{"a":{"command":"srv","args":["-x"],"env":{"K":"v"}},"b":{"type":"http","url":"http://localhost/mcp","headers":{"H":"1"}}}}`))
	if err != nil || s["a"].Command != "srv" || s["a"].Env["K"] != "v" || s["b"].Transport() != "http" || s["b"].Headers["H"] != "1" {
		t.Fatalf("parse = %+v, %v", s, err)
	}
	for _, bad := range []string{`{}`, `[]`, `{"mcpServers":{"a":{"comand":"x"}}}`, `{"mcpServers":`} {
		if _, err := mcpclient.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) succeeded", bad)
		}
	}
	if got := mcpclient.ToolName("my server.v2", "do/it"); got != "mcp__my_server_v2__do_it" {
		t.Fatalf("ToolName = %s", got)
	}
}

// TestExecuteToolSpan checks the span of an MCP call and that the server
// gets its context in _meta.
func TestExecuteToolSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)
	defer tp.Shutdown(context.Background())

	e := env(t)
	s := start(t, e, mcpclient.Servers{"ex": stdio()}, nil)
	r := run(t, context.Background(), e, find(t, s, "mcp__ex__meta"), "toolu_span", `{}`, nil)
	run(t, context.Background(), e, find(t, s, "mcp__ex__fail"), "toolu_fail", `{"message":"no"}`, nil)
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	sp := spans[0]
	if sp.Name() != "execute_tool mcp__ex__meta" || sp.SpanKind() != trace.SpanKindClient {
		t.Fatalf("span %s kind %v", sp.Name(), sp.SpanKind())
	}
	attrs := map[string]string{}
	for _, kv := range sp.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "mcp__ex__meta", "gen_ai.tool.call.id": "toolu_span",
		"gen_ai.tool.type": "extension", "mcp.method.name": "tools/call", "toolwire.mcp.server": "ex", "toolwire.mcp.tool": "meta",
		"mcp.protocol.version": "2026-07-28",
	} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(r.TextContent()), &meta); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("00-%s-%s-01", sp.SpanContext().TraceID(), sp.SpanContext().SpanID())
	if meta["traceparent"] != want {
		t.Errorf("traceparent = %v, want the span's own %s", meta["traceparent"], want)
	}
	if fail := spans[1]; fail.Status().Code != codes.Error || attrValue(fail.Attributes(), "error.type") != "tool_error" {
		t.Errorf("failed call's span: status %v, attributes %v", fail.Status(), fail.Attributes())
	}
}

func attrValue(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestHTTPServerGoneAndBack: a call to an HTTP server that went away is an
// error result, and once the server is back the next call reconnects.
func TestHTTPServerGoneAndBack(t *testing.T) {
	e := env(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	serve := func(lis net.Listener) *http.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "flaky"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})
		// Stateless: a server that is closed keeps no session behind.
		hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})}
		go hs.Serve(lis)
		return hs
	}
	hs := serve(lis)
	s := start(t, e, mcpclient.Servers{"web": {Type: "http", URL: "http://" + addr + "/mcp"}}, nil)
	ping := find(t, s, "mcp__web__ping")
	if r := run(t, context.Background(), e, ping, "p1", `{}`, nil); r.TextContent() != "pong" {
		t.Fatalf("ping = %+v", r)
	}
	hs.Close()
	r := run(t, context.Background(), e, ping, "p2", `{}`, nil)
	if !r.IsError || !strings.Contains(r.TextContent(), `The MCP server "web" stopped during the call`) {
		t.Fatalf("ping to a server that is gone = %+v", r)
	}
	if st := s.Status()[0]; st.State != mcpclient.StateDisconnected {
		t.Fatalf("status = %+v", st)
	}
	// Back on the same address, with sessions of its own: a new one.
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs = serve(lis)
	defer hs.Close()
	if r := run(t, context.Background(), e, ping, "p3", `{}`, nil); r.IsError || r.TextContent() != "pong" {
		t.Fatalf("ping after the server came back = %+v", r)
	}
}
