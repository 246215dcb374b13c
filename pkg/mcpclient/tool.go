package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/tool"
)

// instrumentationName names the package's tracer.
const instrumentationName = "github.com/toolwire/toolwire/pkg/mcpclient"

// Span attribute keys of an MCP call (GenAI and MCP semantic conventions,
// and toolwire's own).
const (
	keyOperation   = attribute.Key("gen_ai.operation.name")
	keyToolName    = attribute.Key("gen_ai.tool.name")
	keyCallID      = attribute.Key("gen_ai.tool.call.id")
	keyToolType    = attribute.Key("gen_ai.tool.type")
	keyMethod      = attribute.Key("mcp.method.name")
	keyMCPSession  = attribute.Key("mcp.session.id")
	keyProtocol    = attribute.Key("mcp.protocol.version")
	keyServer      = attribute.Key("toolwire.mcp.server")
	keyRemoteTool  = attribute.Key("toolwire.mcp.tool")
	keyErrorType   = attribute.Key("error.type")
	spanNamePrefix = "execute_tool "
)

// errCallTimeout is the cause of a call that ran past its timeout.
var errCallTimeout = errors.New("mcp call timeout")

// mcpTool is one tool of an MCP server in the session's pool.
type mcpTool struct {
	srv    *server
	remote string // the tool's name on the server
	spec   tool.Spec
	def    []byte // the server's definition, to notice changes
}

// newTool makes a pool tool of a server's tool definition.
func newTool(s *server, t *mcp.Tool) (*mcpTool, error) {
	name := ToolName(s.name, t.Name)
	if len(name) > maxToolNameLen {
		return nil, fmt.Errorf("its name %s is longer than %d characters", name, maxToolNameLen)
	}
	in := t.InputSchema
	if in == nil {
		in = map[string]any{"type": "object"}
	}
	schemaJSON, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if err := compileSchema(schemaJSON); err != nil {
		return nil, err
	}
	def, _ := json.Marshal(t)
	desc := t.Description
	if utf8.RuneCountInString(desc) > maxDescription {
		desc = string([]rune(desc)[:maxDescription]) + "… [description cut]"
	}
	safe := t.Annotations != nil && t.Annotations.ReadOnlyHint
	conc := tool.ConcurrencyNever
	if safe {
		conc = tool.ConcurrencyAlways
	}
	return &mcpTool{srv: s, remote: t.Name, def: def, spec: tool.Spec{
		Name:        name,
		Description: desc,
		InputSchema: schemaJSON,
		// A server's read-only hint decides scheduling only: a server
		// cannot make its tools run without permission by calling them
		// read-only, so for the permission rules no MCP tool is.
		ReadOnly:    false,
		Concurrency: conc,
	}}, nil
}

func (t *mcpTool) sameAs(o *mcpTool) bool {
	return t.spec.Name == o.spec.Name && bytes.Equal(t.def, o.def)
}

// Server returns the configured name of the tool's server.
func (t *mcpTool) Server() string { return t.srv.name }

// Spec describes the tool to the model.
func (t *mcpTool) Spec() tool.Spec { return t.spec }

// ConcurrencySafe follows the server's readOnlyHint (see Spec.Concurrency).
func (t *mcpTool) ConcurrencySafe(json.RawMessage) bool {
	return t.spec.Concurrency == tool.ConcurrencyAlways
}

// Validate has nothing to check beyond the schema.
func (t *mcpTool) Validate(context.Context, *tool.Env, json.RawMessage) error { return nil }

// Run calls the tool on its server.
func (t *mcpTool) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	start := time.Now()
	ctx, span := otel.Tracer(instrumentationName).Start(ctx, spanNamePrefix+t.spec.Name, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	res := t.run(ctx, span, env, call, start)
	if res.IsError {
		outcome := res.FinalOutcome().String()
		span.SetAttributes(keyErrorType.String(outcome))
		span.SetStatus(codes.Error, "MCP tool call ended with outcome "+outcome)
	}
	return res
}

func (t *mcpTool) run(ctx context.Context, span trace.Span, env *tool.Env, call *tool.Call, start time.Time) *tool.Result {
	span.SetAttributes(keyOperation.String("execute_tool"), keyToolName.String(t.spec.Name), keyCallID.String(call.ID),
		keyToolType.String("extension"), keyMethod.String("tools/call"), keyServer.String(t.srv.name), keyRemoteTool.String(t.remote))
	c, err := t.srv.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return tool.Error(fmt.Sprintf("The MCP server %q is not available: %v", t.srv.name, err))
	}
	if id := c.cs.ID(); id != "" {
		span.SetAttributes(keyMCPSession.String(id))
	}
	if ir := c.cs.InitializeResult(); ir != nil {
		span.SetAttributes(keyProtocol.String(ir.ProtocolVersion))
	}
	timeout := env.Limits.MaxTimeout
	if call.Timeout > 0 && (timeout <= 0 || call.Timeout < timeout) {
		timeout = call.Timeout
	}
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	}
	defer cancel()

	// Progress stops the moment the call returns.
	var pmu sync.Mutex
	done := false
	var lines, total uint64
	t.srv.mu.Lock()
	t.srv.progress[call.ID] = func(p mcp.ProgressNotificationParams) {
		pmu.Lock()
		defer pmu.Unlock()
		if done {
			return
		}
		line := progressLine(p)
		lines++
		total += uint64(len(line))
		call.Progress(tool.Progress{Output: []byte(line), Elapsed: time.Since(start), TotalLines: lines, TotalBytes: total})
	}
	t.srv.mu.Unlock()
	defer func() {
		t.srv.mu.Lock()
		delete(t.srv.progress, call.ID)
		t.srv.mu.Unlock()
		pmu.Lock()
		done = true
		pmu.Unlock()
	}()

	params := &mcp.CallToolParams{Name: t.remote, Arguments: json.RawMessage(call.Input), Meta: traceMeta(ctx)}
	params.SetProgressToken(call.ID)
	res, err := c.cs.CallTool(callCtx, params)
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		return t.result(env, call, res)
	case ctx.Err() != nil:
		return interrupted()
	case errors.Is(context.Cause(callCtx), errCallTimeout):
		return tool.UseError(tool.OutcomeTimeout, fmt.Sprintf("The MCP tool call timed out after %s and was cancelled.", timeout.Round(time.Millisecond)))
	case !broken(c, err):
		// The server answered with an error, or the answer was unusable:
		// the connection is fine.
		if errors.As(err, &rpcErr) {
			return tool.Error(fmt.Sprintf("MCP error %d: %s", rpcErr.Code, rpcErr.Message))
		}
		return tool.Error(fmt.Sprintf("MCP error: %v", err))
	}
	// The connection broke: the server died or went away.
	t.srv.lost(c)
	reason := t.srv.status().Error
	if reason == "" {
		reason = err.Error()
	}
	return tool.Error(fmt.Sprintf("The MCP server %q stopped during the call: %s", t.srv.name, reason))
}

// codeRejected is the JSON-RPC error the SDK gives a request its
// transport could not deliver (an HTTP server that is gone, for one).
const codeRejected = -32005

// broken reports whether err means that the connection c is gone: its
// stream ended (a stdio server exited), the transport could not deliver
// the request, or the server forgot the session.
func broken(c *connection, err error) bool {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
		return true
	case errors.As(err, &rpcErr):
		return rpcErr.Code == codeRejected
	}
	select {
	case <-c.done:
		return true
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

// interrupted is the result of a call whose context ended; the executor
// replaces it with the reason it stopped the call.
func interrupted() *tool.Result {
	return tool.UseError(tool.OutcomeInterrupted, "Interrupted: the MCP tool call was cancelled.")
}

// progressLine renders an MCP progress notification as a line of output.
func progressLine(p mcp.ProgressNotificationParams) string {
	var b strings.Builder
	if p.Total > 0 {
		fmt.Fprintf(&b, "[%g/%g]", p.Progress, p.Total)
	} else {
		fmt.Fprintf(&b, "[%g]", p.Progress)
	}
	if p.Message != "" {
		b.WriteString(" " + p.Message)
	}
	b.WriteString("\n")
	return b.String()
}

// traceMeta carries the trace context of ctx to the server in _meta
// (traceparent, tracestate), as the MCP conventions propose.
func traceMeta(ctx context.Context) mcp.Meta {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	meta := mcp.Meta{}
	for k, v := range carrier {
		meta[k] = v
	}
	return meta
}
