package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

func call(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("toolsvc call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", `toolsvc address: "host:port" or "unix:///path/to.sock"`)
	useEmbedded := fs.Bool("embedded", false, "run the calls in an executor inside this process, on --root, with the tools running as you (as orchestrator -p runs them)")
	progress := fs.Bool("progress", false, "write progress events to stderr as JSON lines")
	sessionID := fs.String("session", "", "session id (default: chosen by the executor)")
	workspace := fs.String("workspace", "", "session workspace, relative to the executor's root")
	completion := fs.Bool("completion-order", false, "print results in completion order instead of tool_use order")
	mode := fs.String("permission-mode", "bypassPermissions", "session permission mode: default, acceptEdits, plan or bypassPermissions (operator rules of the executor still apply)")
	askAnswer := fs.String("ask", "deny", `answer to permission requests: "allow" (once) or "deny"`)
	listTools := fs.Bool("list-tools", false, "print the session's tools (built-in, then MCP) and MCP servers as JSON instead of running calls; stdin is not read")
	requireSpec := fs.String("require-sandbox", "", "protections the executor must enforce, e.g. \"landlock,network:none,pid_isolation\"; an executor whose Hello lacks one is refused before any call is sent (words: "+strings.Join(handshake.Vocabulary(), ", ")+")")
	var mcpConfigs listFlag
	fs.Var(&mcpConfigs, "mcp-config", `MCP servers of the session, as JSON or a file in Claude Code's shape ({"mcpServers": {...}}); ${VAR} is expanded from this environment (repeatable)`)
	var tools toolsFlag
	fs.Var(&tools, "tools", `the only tools the session runs, e.g. "Read,Glob" (repeatable; "" for none; default: all); calls of others get "No such tool available"`)
	connectTimeout := fs.Duration("connect-timeout", 10*time.Second, "how long to wait for a server to listen at --addr (one just started may need a moment)")
	config := executorFlags(fs, true)
	security := rpcauth.RegisterClientFlags(fs, "")
	transport := rpcserver.RegisterTransportFlags(fs, "", "to the server")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: toolsvc call (--addr ADDR | --embedded) [flags] < tool_uses.json

Reads tool_use blocks on stdin — an assistant message in Anthropic format, an
array of content blocks, or one block per line — runs them over one Execute
stream and prints their tool_result blocks as a JSON array. A block whose
"input" is a JSON string is sent as the raw input text, so unparsable input
can be tried. A call the stream cannot carry (more than 16 MiB, or input that
is not UTF-8) gets an is_error result without being sent. Exits 0 when every
call got a result, errors included; with --require-sandbox, exits 1 before
sending any call when the executor's Hello lacks a required protection.

With tracing configured (see below), the calls run under a "toolsvc call"
span, a child of the W3C context in $TRACEPARENT (and $TRACESTATE) if set.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\n"+telemetry.EnvUsage)
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	if (*addr == "") == !*useEmbedded {
		fmt.Fprintln(stderr, "toolsvc call: give exactly one of --addr or --embedded")
		return errUsage
	}
	require, err := handshake.Parse(*requireSpec)
	if err != nil {
		fmt.Fprintf(stderr, "toolsvc call: --require-sandbox: %v\n", err)
		return errUsage
	}
	mcpServers, err := loadMCPConfigs(mcpConfigs, false)
	if err != nil {
		return err
	}
	var uses []*executorv1.ToolUse
	if !*listTools {
		if uses, err = readToolUses(stdin); err != nil {
			return err
		}
	}
	errLog := slog.New(slog.NewTextHandler(stderr, nil))
	shutdown, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "toolsvc-call", ServiceVersion: version, Logger: errLog})
	if err != nil {
		return err
	}
	defer flushTelemetry(shutdown, errLog)
	// One span for the whole command, so that its calls share a trace.
	ctx, span := otel.Tracer("github.com/toolwire/toolwire/cmd/toolsvc").Start(parentFromEnv(ctx), "toolsvc call")
	defer span.End()
	for _, u := range uses {
		telemetry.InjectToolUse(ctx, u)
	}

	var client executorv1.ExecutorServiceClient
	if *useEmbedded {
		if err := sandbox.BecomeSubreaper(); err != nil {
			return fmt.Errorf("become child subreaper: %w", err)
		}
		cfg, err := config()
		if err != nil {
			return err
		}
		if !isSet(fs, "max-sessions") {
			// One session: the bounds and the reserve are sized for it,
			// so that a container with a small pids limit can run it.
			cfg.MaxSessions = 1
		}
		ex, err := embedded.Start(ctx, cfg)
		if err != nil {
			return err
		}
		defer sandbox.ReleaseSessionTempRoots() // after Close: the sessions are over
		defer ex.Close()
		client = ex.Client()
	} else {
		secure, err := security.DialOptions(*addr)
		if err != nil {
			return err
		}
		if err := transport.Validate(); err != nil {
			return fmt.Errorf("--grpc-*: %w", err)
		}
		secure = append(secure, transport.DialOptions()...)
		conn, err := grpc.NewClient(*addr, append(secure,
			grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpcserver.MaxMessageBytes), grpc.MaxCallSendMsgSize(rpcserver.MaxMessageBytes)))...)
		if err != nil {
			return fmt.Errorf("--addr %s: %w", *addr, err)
		}
		defer conn.Close()
		waitListening(ctx, *addr, *connectTimeout)
		client = executorv1.NewExecutorServiceClient(conn)
	}

	order := executorv1.ResultOrder_RESULT_ORDER_TOOL_USE
	if *completion {
		order = executorv1.ResultOrder_RESULT_ORDER_COMPLETION
	}
	pmode, err := permission.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("--permission-mode: %w", err)
	}
	answer := executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_DENY
	switch *askAnswer {
	case "allow":
		answer = executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ONCE
	case "deny":
	default:
		return fmt.Errorf(`--ask must be "allow" or "deny", not %q`, *askAnswer)
	}
	open := &executorv1.Open{
		SessionId: *sessionID, Workspace: *workspace, ClientName: "toolsvc call", ClientVersion: version,
		Options:    &executorv1.SessionOptions{ResultOrder: order},
		Settings:   settingspb.ToProto(settings.Settings{Permissions: settings.Permissions{DefaultMode: pmode}}),
		McpServers: execgrpc.MCPServersToProto(mcpServers),
		Tools:      tools.set,
	}
	if *listTools {
		return printTools(ctx, client, open, require, stdout)
	}
	results, err := runCalls(ctx, client, open, require, uses, answer, progressWriter(*progress, stderr))
	if err != nil {
		if !*useEmbedded && status.Code(err) == codes.Unavailable && rpcerr.Reason(err) == "" {
			return fmt.Errorf("--addr %s: cannot reach toolsvc (waited --connect-timeout %s for it to listen): %w", *addr, *connectTimeout, err)
		}
		return explainRefusal(err)
	}
	blocks := make([]execgrpc.ToolResultBlock, 0, len(results))
	for _, r := range results {
		blocks = append(blocks, execgrpc.ToolResult(r))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(blocks)
}

// toolsFlag is --tools: tool names, comma-separated, the flag repeatable.
// Given at all, even empty, it sets the session's tools.
type toolsFlag struct{ set *executorv1.ToolSet }

func (f *toolsFlag) String() string {
	if f.set == nil {
		return ""
	}
	return strings.Join(f.set.GetNames(), ",")
}

func (f *toolsFlag) Set(v string) error {
	if f.set == nil {
		f.set = &executorv1.ToolSet{Names: []string{}}
	}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			f.set.Names = append(f.set.Names, name)
		}
	}
	return nil
}

// waitListening waits up to timeout for a server to listen at addr (a
// unix socket or host:port), so that one started just before
// (`toolsvc serve ... &` in a script) is not reported unreachable. Only "no
// such socket" and "connection refused" are waited out; anything else, and
// TLS or token trouble, is left to the call that follows to report at once.
func waitListening(ctx context.Context, addr string, timeout time.Duration) {
	network, address := "tcp", addr
	if path, ok := rpcserver.UnixPath(addr); ok {
		network, address = "unix", path
	} else if strings.Contains(addr, "://") {
		return // a resolver's target: gRPC's business
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err == nil {
			_ = conn.Close()
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// parentFromEnv returns ctx with the remote span context of $TRACEPARENT
// and $TRACESTATE, as a caller that traces itself passes it to a child
// process; ctx unchanged without them.
func parentFromEnv(ctx context.Context) context.Context {
	tp := os.Getenv("TRACEPARENT")
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": os.Getenv("TRACESTATE")})
}

// progressWriter returns a function that prints non-result events as JSON
// lines, or nil.
func progressWriter(enabled bool, w io.Writer) func(*executorv1.ExecuteResponse) {
	if !enabled {
		return nil
	}
	return func(ev *executorv1.ExecuteResponse) {
		b, err := protojson.Marshal(ev)
		if err == nil {
			fmt.Fprintf(w, "%s\n", b)
		}
	}
}

// runCalls opens a session, checks the executor's Hello against require,
// sends every tool use, half-closes, and collects one Result per distinct
// tool_use id in the order they arrive.
func runCalls(ctx context.Context, client executorv1.ExecutorServiceClient, open *executorv1.Open, require handshake.Requirements,
	uses []*executorv1.ToolUse, answer executorv1.PermissionBehavior, onEvent func(*executorv1.ExecuteResponse)) ([]*executorv1.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Execute(ctx)
	if err != nil {
		return nil, fmt.Errorf("open Execute stream: %w", err)
	}
	hello, err := openSession(stream, open, require)
	if err != nil {
		return nil, err
	}
	if onEvent != nil {
		onEvent(hello)
	}
	want := make(map[string]bool, len(uses))
	for _, u := range uses {
		want[u.GetId()] = true
	}
	var results []*executorv1.Result
	for _, u := range uses {
		// A call the stream cannot carry gets its result here: sending it
		// would end the stream for every call.
		if r := execgrpc.Unsendable(u); r != nil {
			if want[u.GetId()] {
				delete(want, u.GetId())
				results = append(results, r)
			}
			continue
		}
		if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: u}}); err != nil {
			return nil, fmt.Errorf("send tool_use %s: %w", u.GetId(), streamErr(stream, err))
		}
	}
	// The send side stays open until every result is in: permission
	// requests are answered on it.
	closeSend := func() {
		if err := stream.CloseSend(); err != nil {
			cancel()
		}
	}
	if len(want) == 0 {
		closeSend()
	}
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return results, fmt.Errorf("receive: %w", err)
		}
		if r := ev.GetResult(); r != nil {
			if want[r.GetToolUseId()] {
				delete(want, r.GetToolUseId())
				results = append(results, r)
				if len(want) == 0 {
					closeSend()
				}
			}
			continue
		}
		if q := ev.GetPermissionRequest(); q != nil {
			err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_PermissionDecision{PermissionDecision: &executorv1.PermissionDecision{
				ToolUseId: q.GetToolUseId(), Behavior: answer, Message: "toolsvc call was run with --ask=deny"}}})
			if err != nil {
				return results, fmt.Errorf("answer permission request: %w", err)
			}
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	if len(want) > 0 {
		return results, fmt.Errorf("the stream ended before %d call(s) got a result", len(want))
	}
	return results, nil
}

// openSession sends open, waits for the Hello and checks what it says of
// the sandbox against require. An executor that falls short is left
// before any call is sent: the stream is cancelled, which ends the
// session.
func openSession(stream executorv1.ExecutorService_ExecuteClient, open *executorv1.Open, require handshake.Requirements) (*executorv1.ExecuteResponse, error) {
	if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: open}}); err != nil {
		return nil, fmt.Errorf("send open: %w", streamErr(stream, err))
	}
	ev, err := stream.Recv()
	if err != nil {
		return nil, fmt.Errorf("receive hello: %w", err)
	}
	hello := ev.GetHello()
	if hello == nil {
		return nil, fmt.Errorf("the executor sent %T before its hello", ev.GetEvent())
	}
	if err := require.Check(sandboxInfo(hello.GetSandbox())); err != nil {
		return nil, fmt.Errorf("--require-sandbox: %w", err)
	}
	return ev, nil
}

// sandboxInfo is what a Hello says of the sandbox, for handshake.
func sandboxInfo(s *executorv1.SandboxInfo) handshake.Info {
	info := handshake.Info{Backend: s.GetBackend(), Network: s.GetNetwork()}
	for _, p := range s.GetEnforced() {
		info.Enforced = append(info.Enforced, handshake.ProtectionWord(p.String()))
	}
	return info
}

// streamErr returns the status that ended the stream when Send reports
// only io.EOF (for example an Unauthenticated refusal).
func streamErr(stream executorv1.ExecutorService_ExecuteClient, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	for {
		if _, rerr := stream.Recv(); rerr != nil {
			if rerr == io.EOF {
				return err
			}
			return rerr
		}
	}
}

// block is the part of an Anthropic content block toolsvc call reads.
type block struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// message is an Anthropic assistant message.
type message struct {
	ID      string  `json:"id"`
	Content []block `json:"content"`
}

// readToolUses reads the tool_use blocks of stdin: one or more JSON values,
// each an assistant message, an array of blocks, or a single block.
func readToolUses(r io.Reader) ([]*executorv1.ToolUse, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var uses []*executorv1.ToolUse
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("stdin: value %d is not JSON: %w", n, err)
		}
		raw = bytes.TrimSpace(raw)
		msgID := fmt.Sprintf("msg_stdin_%d", n)
		var blocks []block
		switch {
		case len(raw) > 0 && raw[0] == '[':
			if err := json.Unmarshal(raw, &blocks); err != nil {
				return nil, fmt.Errorf("stdin: value %d: %w", n, err)
			}
		default:
			var m message
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, fmt.Errorf("stdin: value %d: %w", n, err)
			}
			if m.Content != nil {
				blocks = m.Content
				if m.ID != "" {
					msgID = m.ID
				}
			} else {
				var b block
				if err := json.Unmarshal(raw, &b); err != nil {
					return nil, fmt.Errorf("stdin: value %d: %w", n, err)
				}
				blocks = []block{b}
				msgID = "msg_stdin"
			}
		}
		for _, b := range blocks {
			if b.Type != "tool_use" {
				continue
			}
			if b.ID == "" {
				return nil, errors.New("stdin: a tool_use block has no id")
			}
			uses = append(uses, &executorv1.ToolUse{Id: b.ID, Name: b.Name, InputJson: inputText(b.Input), AssistantMessageId: msgID})
		}
	}
	if len(uses) == 0 {
		return nil, errors.New("stdin holds no tool_use blocks")
	}
	return uses, nil
}

// inputText returns the input text to send: a JSON string is taken as the
// raw text the model produced; anything else is sent as is.
func inputText(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}

// printTools opens a session, prints its tools (ListTools with the
// session's id: built-in tools, then MCP tools) and its MCP servers (from
// Hello) as one JSON object, and ends the session.
func printTools(ctx context.Context, client executorv1.ExecutorServiceClient, open *executorv1.Open, require handshake.Requirements, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Execute(ctx)
	if err != nil {
		return fmt.Errorf("open Execute stream: %w", err)
	}
	ev, err := openSession(stream, open, require)
	if err != nil {
		return err
	}
	hello := ev.GetHello()
	list, err := client.ListTools(ctx, &executorv1.ListToolsRequest{SessionId: hello.GetSessionId()})
	if err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	if err := stream.CloseSend(); err == nil {
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}
	}
	out := struct {
		Tools      []json.RawMessage `json:"tools"`
		MCPServers []json.RawMessage `json:"mcp_servers"`
	}{Tools: []json.RawMessage{}, MCPServers: []json.RawMessage{}}
	for _, t := range list.GetTools() {
		b, _ := protojson.Marshal(t)
		out.Tools = append(out.Tools, b)
	}
	for _, st := range hello.GetMcpServers() {
		b, _ := protojson.Marshal(st)
		out.MCPServers = append(out.MCPServers, b)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
