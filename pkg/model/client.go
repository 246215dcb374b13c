package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/cenkalti/backoff/v5"
)

// Defaults of Config.
const (
	// DefaultModel is a current model the SDK does not mark deprecated.
	DefaultModel = string(anthropic.ModelClaudeSonnet5_5)
	// DefaultSmallModel is a small, fast model for side jobs such as
	// answering a WebFetch prompt from a page; also one the SDK does not
	// mark deprecated.
	DefaultSmallModel        = string(anthropic.ModelClaudeHaiku5_5)
	DefaultMaxTokens         = 16384
	DefaultMaxRetries        = 10
	DefaultRetryBaseDelay    = 500 * time.Millisecond
	DefaultRetryMaxDelay     = 32 * time.Second
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// Config configures a Client. Zero fields take the defaults above.
type Config struct {
	// APIKey is sent as x-api-key. One of APIKey and AuthToken is required.
	APIKey string
	// AuthToken is sent as a bearer token instead of an API key.
	AuthToken string
	// BaseURL replaces the API's address, e.g. for a compatible gateway.
	BaseURL string
	// Model is used by requests that name none.
	Model string
	// MaxTokens is used by requests that give none.
	MaxTokens int
	// ThinkingBudget turns on extended thinking for requests that give no
	// budget of their own; zero leaves it off.
	ThinkingBudget int
	// MaxRetries is how often a failed request is retried (429, 5xx, 529
	// overloaded, connection errors before any content arrived). Negative
	// means none.
	MaxRetries int
	// RetryBaseDelay is the first backoff; each retry doubles it, up to
	// RetryMaxDelay, each randomized by up to a quarter either way.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps one backoff before its randomization, and the
	// wait a retry-after header may ask for (a longer one is not waited
	// for: the backoff applies).
	RetryMaxDelay time.Duration
	// StreamIdleTimeout ends a response stream that delivers nothing for
	// this long.
	StreamIdleTimeout time.Duration
	// HTTPClient replaces the SDK's HTTP client.
	HTTPClient *http.Client
	// Options are passed on to the SDK after ours.
	Options []option.RequestOption
	// Logger receives retry and failure logs; nil discards them.
	Logger *slog.Logger
}

// Client streams responses of the Anthropic Messages API. It retries failed
// requests itself (the SDK's own retries are off) so that every retry can be
// reported to the user. A Client is safe for concurrent use.
type Client struct {
	sdk    anthropic.Client
	cfg    Config
	log    *slog.Logger
	meters meters
	tools  toolCache
}

// ErrNoCredentials is returned by New when neither an API key nor an auth
// token is configured.
var ErrNoCredentials = errors.New("model: no API credentials: set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL for a compatible endpoint)")

// New returns a Client for cfg. It reads no environment variables: the
// caller resolves ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL (see ConfigFromEnv).
func New(cfg Config) (*Client, error) {
	if cfg.APIKey == "" && cfg.AuthToken == "" {
		return nil, ErrNoCredentials
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.RetryBaseDelay <= 0 {
		cfg.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if cfg.RetryMaxDelay <= 0 {
		cfg.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
		// Stream makes the request's span ("chat {model}", retries
		// included); the SDK's own would count every request twice in a
		// GenAI-aware backend.
		option.WithoutOpenTelemetry(),
		// First of the middlewares, so that every other one, cfg.Options'
		// included, sees the body that is sent.
		option.WithMiddleware(sendBody),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		opts = append(opts, option.WithAuthToken(cfg.AuthToken))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	opts = append(opts, cfg.Options...)
	return &Client{sdk: anthropic.NewClient(opts...), cfg: cfg, log: log, meters: newMeters()}, nil
}

// ConfigFromEnv returns a Config with the credentials, address and model
// from the environment: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN),
// ANTHROPIC_BASE_URL and ANTHROPIC_MODEL, as Claude Code reads them. A
// caller with a model of its own (a --model flag) sets Model afterwards.
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{
		APIKey:    getenv("ANTHROPIC_API_KEY"),
		AuthToken: getenv("ANTHROPIC_AUTH_TOKEN"),
		BaseURL:   getenv("ANTHROPIC_BASE_URL"),
		Model:     strings.TrimSpace(getenv("ANTHROPIC_MODEL")),
	}
}

// Model returns the default model of c.
func (c *Client) Model() string { return c.cfg.Model }

// Tool is a tool offered to the model.
type Tool struct {
	// Name is what the model calls it.
	Name string
	// Description tells the model what it does.
	Description string
	// InputSchema is the JSON Schema of its input object.
	InputSchema json.RawMessage
	// CacheBreakpoint puts a prompt-cache breakpoint after this tool.
	// When no tool of a request has one, the last tool gets it.
	CacheBreakpoint bool
}

// Request is one model request.
type Request struct {
	// Model overrides the client's model.
	Model string
	// MaxTokens overrides the client's max_tokens.
	MaxTokens int
	// ThinkingBudget overrides the client's thinking budget; negative turns
	// thinking off.
	ThinkingBudget int
	// System is the system prompt; it is a prompt-cache breakpoint.
	System string
	// Tools are offered in this order; the tools marked CacheBreakpoint,
	// or else the last, are prompt-cache breakpoints.
	Tools []Tool
	// Messages is the conversation; the last block of the newest message is
	// a prompt-cache breakpoint.
	Messages []Message
	// Encoded, when not empty, holds EncodeMessage(Messages[i]) for each
	// i < len(Encoded), so that a caller sending a growing conversation
	// encodes each message once rather than on every request. The newest
	// message is encoded anew whatever Encoded holds: it carries the
	// cache breakpoint.
	Encoded []json.RawMessage
	// WebSearch, when set, offers the API's server-side web search tool
	// (web_search_20250305) before Tools. The API runs the searches; the
	// response carries server_tool_use and web_search_tool_result blocks,
	// kept as they came (Block.Raw).
	WebSearch *WebSearch
}

// WebSearch configures the Messages API's web search tool.
type WebSearch struct {
	// MaxUses caps the searches of one request; zero leaves it to the API.
	MaxUses int
	// AllowedDomains, when set, are the only domains results come from.
	AllowedDomains []string
	// BlockedDomains never appear in results. The API takes one of the
	// two lists, not both.
	BlockedDomains []string
}

// EncodeMessage returns m as a request sends it, for Request.Encoded.
func EncodeMessage(m Message) (json.RawMessage, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("model: encode %s message: %w", m.Role, err)
	}
	return raw, nil
}

// StopReason says why the model stopped.
type StopReason string

// Stop reasons of the Messages API.
const (
	StopEndTurn      StopReason = "end_turn"
	StopToolUse      StopReason = "tool_use"
	StopMaxTokens    StopReason = "max_tokens"
	StopStopSequence StopReason = "stop_sequence"
	StopPauseTurn    StopReason = "pause_turn"
	StopRefusal      StopReason = "refusal"
)

// Usage counts the tokens of a response.
type Usage struct {
	// InputTokens are uncached input tokens.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens are generated tokens.
	OutputTokens int64 `json:"output_tokens"`
	// CacheReadInputTokens were read from the prompt cache.
	CacheReadInputTokens int64 `json:"cache_read_input_tokens,omitempty"`
	// CacheCreationInputTokens were written to the prompt cache.
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
	}
}

// Response is an assistant message as far as it arrived.
type Response struct {
	// ID is the message id ("msg_...").
	ID string
	// Model that answered.
	Model string
	// Content holds the blocks that arrived complete (content_block_stop).
	Content []Block
	// StopReason is set when message_delta arrived.
	StopReason StopReason
	// StopSequence is the stop sequence that ended the message, if any.
	StopSequence string
	// Usage counts the tokens.
	Usage Usage
	// Complete is true when message_stop arrived.
	Complete bool
}

// Message returns the response as an assistant message to keep in the
// transcript. Text blocks without visible text are left out: the API refuses
// them when the message is sent back.
func (r *Response) Message() Message {
	content := make([]Block, 0, len(r.Content))
	for _, b := range r.Content {
		if b.Type == BlockText && strings.TrimSpace(b.Text) == "" {
			continue
		}
		content = append(content, b)
	}
	return Message{Role: RoleAssistant, Content: content}
}

// EventKind names a stream event.
type EventKind int

// Stream event kinds.
const (
	// EventMessageStart: a response began; MessageID is set.
	EventMessageStart EventKind = iota + 1
	// EventTextDelta: Text was appended to the text block at Index.
	EventTextDelta
	// EventThinkingDelta: Text was appended to the thinking block at Index.
	EventThinkingDelta
	// EventBlockComplete: the block at Index is complete; Block is set, and
	// RawInput for a tool_use.
	EventBlockComplete
	// EventRetry: the request failed and is retried; Retry is set.
	EventRetry
)

// Event is reported while a response streams.
type Event struct {
	// Kind says which fields are set.
	Kind EventKind
	// MessageID of the response.
	MessageID string
	// Index of the content block.
	Index int
	// Text of a delta.
	Text string
	// Block that completed.
	Block *Block
	// RawInput is a completed tool_use's input exactly as the model wrote it.
	RawInput string
	// Retry describes a retry.
	Retry *Retry
}

// Retry describes a retried request.
type Retry struct {
	// Attempt counts retries from 1.
	Attempt int
	// MaxRetries is the most retries that will be made.
	MaxRetries int
	// Delay is the wait before this retry.
	Delay time.Duration
	// Err is what failed.
	Err error
}

// APIError is an error answer of the Messages API.
type APIError struct {
	// StatusCode is the HTTP status (200 for an error event mid-stream).
	StatusCode int
	// Type is the API's error type, e.g. "overloaded_error".
	Type string
	// Message is the API's message.
	Message string
	// RequestID is the request-id header.
	RequestID string
	// RetryAfter is the server's requested wait, if it sent one.
	RetryAfter time.Duration
}

// Error formats the error the way users see API errors.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("API Error: ")
	if e.StatusCode != 0 && e.StatusCode != http.StatusOK {
		fmt.Fprintf(&b, "%d ", e.StatusCode)
	}
	if e.Type != "" {
		b.WriteString(e.Type)
	} else {
		b.WriteString(http.StatusText(e.StatusCode))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Retryable reports whether the request may succeed when sent again.
func (e *APIError) Retryable() bool {
	switch e.Type {
	case "overloaded_error", "rate_limit_error", "api_error", "timeout_error":
		return true
	}
	switch {
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict,
		e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		return true
	}
	return false
}

// ErrStreamCut is wrapped by the error of a response stream that ended
// before message_stop.
//
//lint:ignore ST1005 the text is Claude Code's, shown to users as it is.
var ErrStreamCut = errors.New("API Error: Connection closed mid-response. The response above may be incomplete.")

// errIdle ends a stream that went silent.
var errIdle = errors.New("model: response stream idle for too long")

// Stream sends req and streams the response, calling on for each event from
// the calling goroutine. Requests that fail before any content block arrived
// are retried with exponential backoff and jitter (reported as EventRetry).
// A stream that breaks after content arrived is not retried: Stream returns
// the complete blocks received so far with an error wrapping ErrStreamCut
// (or the API error the stream carried). The returned Response is nil only
// when nothing arrived.
//
// Each call is one span, "chat {model}", with the GenAI attributes of the
// request and its response (retries included).
func (c *Client) Stream(ctx context.Context, req Request, on func(Event)) (resp *Response, err error) {
	if on == nil {
		on = func(Event) {}
	}
	if req.Model == "" {
		req.Model = c.cfg.Model
	}
	if req.MaxTokens <= 0 {
		req.MaxTokens = c.cfg.MaxTokens
	}
	ctx, span := startChat(ctx, req)
	start := time.Now()
	defer func() { c.meters.endChat(ctx, span, req, start, resp, err) }()
	params, tools, err := c.params(req)
	if err != nil {
		return nil, err
	}
	raw, err := body(params, tools, req)
	if err != nil {
		return nil, err
	}
	sdkParams := anthropic.MessageNewParams{Model: params.Model, MaxTokens: params.MaxTokens, Thinking: params.Thinking}

	policy := &retryPolicy{max: c.cfg.RetryMaxDelay, exp: backoff.ExponentialBackOff{
		InitialInterval:     c.cfg.RetryBaseDelay,
		RandomizationFactor: 0.25,
		Multiplier:          2,
		MaxInterval:         c.cfg.RetryMaxDelay,
	}}
	attempt := 0
	resp, err = backoff.Retry(ctx, func() (*Response, error) {
		attempt++
		resp, progressed, err := c.streamOnce(ctx, sdkParams, raw, on)
		policy.last = err
		switch {
		case err == nil:
			return resp, nil
		case progressed:
			// Content reached the caller: sending the request again would
			// repeat it. The caller gets the complete blocks and the error.
			return resp, backoff.Permanent(err)
		case ctx.Err() != nil || !retryable(err):
			return nil, backoff.Permanent(err)
		}
		return nil, err
	},
		backoff.WithBackOff(policy),
		backoff.WithMaxTries(uint(c.cfg.MaxRetries)+1),
		// MaxRetries bounds the retries; the caller's ctx bounds the time.
		backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, delay time.Duration) {
			c.log.WarnContext(ctx, "model request failed; retrying", "attempt", attempt, "max_retries", c.cfg.MaxRetries, "delay", delay, "err", err)
			on(Event{Kind: EventRetry, Retry: &Retry{Attempt: attempt, MaxRetries: c.cfg.MaxRetries, Delay: delay, Err: err}})
		}))
	// The last try returns its error as the operation gave it.
	if perm, ok := err.(*backoff.PermanentError); ok {
		err = perm.Unwrap()
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(err, cause) && !errors.Is(policy.last, cause) {
		err = fmt.Errorf("model: waiting to retry: %w", err)
	}
	return resp, err
}

// retryPolicy paces the retries of one Stream: exponential backoff with
// jitter, except that a retry-after the API sent is honoured when it is no
// longer than max.
type retryPolicy struct {
	exp  backoff.ExponentialBackOff
	max  time.Duration
	last error // of the attempt that just failed
}

// NextBackOff implements backoff.BackOff.
func (p *retryPolicy) NextBackOff() time.Duration {
	d := p.exp.NextBackOff()
	var ae *APIError
	if errors.As(p.last, &ae) && ae.RetryAfter > 0 && ae.RetryAfter <= p.max {
		return ae.RetryAfter
	}
	return d
}

// Reset implements backoff.BackOff.
func (p *retryPolicy) Reset() { p.exp.Reset() }

func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Retryable()
	}
	// Connection refused or reset, or a body cut before any content: the
	// request may well succeed again.
	return true
}

// params returns the request's parameters for the SDK, without its tools
// and messages, and the tools' JSON in the order they are offered (the web
// search tool first). body puts the two together with the messages.
func (c *Client) params(req Request) (anthropic.MessageNewParams, []json.RawMessage, error) {
	modelName := req.Model
	if modelName == "" {
		modelName = c.cfg.Model
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = c.cfg.MaxTokens
	}
	budget := req.ThinkingBudget
	if budget == 0 {
		budget = c.cfg.ThinkingBudget
	}
	if len(req.Messages) == 0 {
		return anthropic.MessageNewParams{}, nil, errors.New("model: request has no messages")
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(modelName),
		MaxTokens: int64(maxTokens),
	}
	if budget > 0 {
		if budget >= maxTokens {
			return p, nil, fmt.Errorf("model: thinking budget %d must be below max_tokens %d", budget, maxTokens)
		}
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(budget))
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System, CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	}
	tools := make([]json.RawMessage, 0, len(req.Tools)+1)
	if ws := req.WebSearch; ws != nil {
		if len(ws.AllowedDomains) > 0 && len(ws.BlockedDomains) > 0 {
			return p, nil, errors.New("model: web search takes allowed or blocked domains, not both")
		}
		tp := &anthropic.WebSearchTool20250305Param{AllowedDomains: ws.AllowedDomains, BlockedDomains: ws.BlockedDomains}
		if ws.MaxUses > 0 {
			tp.MaxUses = anthropic.Int(int64(ws.MaxUses))
		}
		raw, err := anthropic.ToolUnionParam{OfWebSearchTool20250305: tp}.MarshalJSON()
		if err != nil {
			return p, nil, fmt.Errorf("model: encode web search tool: %w", err)
		}
		tools = append(tools, raw)
	}
	marked := slices.ContainsFunc(req.Tools, func(t Tool) bool { return t.CacheBreakpoint })
	for i, t := range req.Tools {
		raw, err := c.tools.encode(t, t.CacheBreakpoint || (!marked && i == len(req.Tools)-1))
		if err != nil {
			return p, nil, err
		}
		tools = append(tools, raw)
	}
	return p, tools, nil
}

// toolCache keeps the JSON of the tools a client has offered: the same
// tools go with every request of a conversation, and encoding them (their
// schemas compacted by encoding/json) cost more than any other part of a
// request's body but the messages.
type toolCache struct {
	mu  sync.Mutex
	raw map[toolKey]json.RawMessage
}

// toolKey is what a tool's JSON is made of.
type toolKey struct {
	name, description, schema string
	breakpoint                bool
}

// maxCachedTools bounds a toolCache: past it, the cache starts again
// (tools offered once, by a client that keeps changing them, are not kept
// for ever).
const maxCachedTools = 1024

// encode returns t's JSON, with a cache breakpoint after it if asked.
func (tc *toolCache) encode(t Tool, breakpoint bool) (json.RawMessage, error) {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	key := toolKey{t.Name, t.Description, string(schema), breakpoint}
	tc.mu.Lock()
	raw, ok := tc.raw[key]
	tc.mu.Unlock()
	if ok {
		return raw, nil
	}
	var cc *cacheControl
	if breakpoint {
		cc = ephemeral
	}
	raw, err := json.Marshal(struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl *cacheControl   `json:"cache_control,omitempty"`
	}{t.Name, t.Description, schema, cc})
	if err != nil {
		return nil, fmt.Errorf("model: encode tool %q: %w", t.Name, err)
	}
	tc.mu.Lock()
	if tc.raw == nil || len(tc.raw) >= maxCachedTools {
		tc.raw = make(map[toolKey]json.RawMessage)
	}
	tc.raw[key] = raw
	tc.mu.Unlock()
	return raw, nil
}

// body is the JSON of the request to send: "stream": true first (the SDK
// sets it, and finds it at once there), p's fields, the tools' JSON, and
// the messages, each taken from req.Encoded when it is there. The SDK
// would encode the tools and the whole conversation again on every
// request; body only lists their JSON in order.
func body(p anthropic.MessageNewParams, tools []json.RawMessage, req Request) (*requestBody, error) {
	p.Messages, p.Tools = nil, nil
	head, err := p.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("model: encode request: %w", err)
	}
	head = bytes.TrimSpace(head)
	if len(head) < 2 || head[0] != '{' || head[len(head)-1] != '}' {
		return nil, fmt.Errorf("model: request encoded as %.40q, not an object", head)
	}
	inner := bytes.TrimSpace(head[1 : len(head)-1])
	// Messages with JSON of their own, then the rest encoded here, the
	// newest with the cache breakpoint.
	msgs := req.Messages
	n := len(msgs)
	known := min(len(req.Encoded), max(n-1, 0))
	rest := make([]json.RawMessage, 0, n-known)
	for i := known; i < n; i++ {
		m := msgs[i]
		if i == n-1 {
			m = withCacheBreakpoint(msgs[i:])[0]
		}
		raw, err := EncodeMessage(m)
		if err != nil {
			return nil, err
		}
		rest = append(rest, raw)
	}
	start := append([]byte(`{"stream":true,`), inner...)
	if len(inner) > 0 {
		start = append(start, ',')
	}
	var segs []segment
	if len(tools) > 0 {
		segs = append(segs, segment{lit: append(start, `"tools":[`...)}, segment{raws: [][]json.RawMessage{tools}},
			segment{lit: []byte(`],"messages":[`)})
	} else {
		segs = append(segs, segment{lit: append(start, `"messages":[`...)})
	}
	segs = append(segs, segment{raws: [][]json.RawMessage{req.Encoded[:known], rest}}, segment{lit: []byte("]}")})
	b := &requestBody{segs: segs}
	for _, s := range segs {
		b.size += int64(len(s.lit))
		k := 0
		for _, group := range s.raws {
			for _, raw := range group {
				b.size += int64(len(raw))
				k++
			}
		}
		b.size += int64(max(k-1, 0)) // the commas
	}
	return b, nil
}

// requestBody is a request's JSON as the pieces it is made of, in order:
// what was encoded for this request, and the JSON of the tools and of
// every message, which a session keeps from one request to the next. The
// transport reads the pieces as it writes the request, so that no request
// makes a copy of the whole conversation: in a conversation of 200 turns
// that copy was 108 KB, twice a turn, all of it garbage to collect.
type requestBody struct {
	segs []segment
	size int64
}

// segment is text to send as it is, or the raws of every group as the
// elements of one JSON array, without its brackets.
type segment struct {
	lit  []byte
	raws [][]json.RawMessage
}

// reader returns a reader of the whole body.
func (b *requestBody) reader() io.Reader { return &bodyReader{segs: b.segs} }

// bodyKey is the context key under which streamOnce hands its body to
// sendBody.
type bodyKey struct{}

// sendBody is a middleware that puts the request's body (see streamOnce)
// in place of the SDK's stand-in, with its length and a way to read it
// again, which net/http needs to resend a request whose connection closed
// before it went out.
func sendBody(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if b, ok := r.Context().Value(bodyKey{}).(*requestBody); ok {
		r.Body, r.ContentLength = io.NopCloser(b.reader()), b.size
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.reader()), nil }
	}
	return next(r)
}

// bodyReader reads a requestBody: segs[seg], at group and item in an
// array, off bytes into the current text.
type bodyReader struct {
	segs        []segment
	seg         int
	group, item int
	off         int
	comma       bool // the array's next element comes after a comma
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.seg < len(r.segs) {
		s := &r.segs[r.seg]
		if s.raws == nil {
			k := copy(p[n:], s.lit[r.off:])
			n, r.off = n+k, r.off+k
			if r.off == len(s.lit) {
				r.seg, r.off = r.seg+1, 0
			}
			continue
		}
		if r.group == len(s.raws) {
			r.seg, r.group, r.item, r.comma = r.seg+1, 0, 0, false
			continue
		}
		if r.item == len(s.raws[r.group]) {
			r.group, r.item = r.group+1, 0
			continue
		}
		if r.comma { // set only between two elements
			p[n] = ','
			n++
			r.comma = false
			continue
		}
		raw := s.raws[r.group][r.item]
		k := copy(p[n:], raw[r.off:])
		n, r.off = n+k, r.off+k
		if r.off == len(raw) {
			r.item, r.off, r.comma = r.item+1, 0, true
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// streamOnce sends the request once and streams its response. The SDK's
// Message.Accumulate builds the message from the events; streamOnce adds
// what a conversation needs on top: each block is handed to on the moment
// its content_block_stop arrives (a tool_use then starts on the executor
// while the model goes on), and Response keeps only the blocks that
// arrived complete, so that a stream cut mid-message leaves a response
// whose every block can be kept.
//
// The request sent is body. The SDK encodes params too before body takes
// their place, so Stream passes only what the SDK looks at itself (the
// model and thinking, for its deprecation warnings) and max_tokens.
func (c *Client) streamOnce(ctx context.Context, params anthropic.MessageNewParams, body *requestBody, on func(Event)) (resp *Response, progressed bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(c.cfg.StreamIdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()

	// The SDK sets "stream" in a body it holds in one buffer, which would
	// copy the whole conversation: it gets a stand-in that says so
	// already, and sendBody puts body in its place on the way out.
	stream := c.sdk.Messages.NewStreaming(context.WithValue(ctx, bodyKey{}, body), params,
		option.WithRequestBody("application/json", bytes.NewBufferString(`{"stream":true}`)))
	defer stream.Close()

	resp = &Response{}
	var msg anthropic.Message
	for stream.Next() {
		idle.Reset(c.cfg.StreamIdleTimeout)
		ev := stream.Current()
		// The SDK empties a tool input that is not valid JSON when its
		// block stops. The executor must see the model's input as it came,
		// to answer with the InputValidationError the model knows.
		var rawInput string
		if ev.Type == "content_block_stop" && ev.Index >= 0 && ev.Index < int64(len(msg.Content)) {
			rawInput = string(msg.Content[ev.Index].Input)
		}
		if err := msg.Accumulate(ev); err != nil {
			return resp, progressed, fmt.Errorf("model: malformed response stream: %w", err)
		}
		switch ev.Type {
		case "message_start":
			resp.ID, resp.Model = msg.ID, string(msg.Model)
			resp.Usage = Usage{
				InputTokens:              msg.Usage.InputTokens,
				OutputTokens:             msg.Usage.OutputTokens,
				CacheReadInputTokens:     msg.Usage.CacheReadInputTokens,
				CacheCreationInputTokens: msg.Usage.CacheCreationInputTokens,
			}
			on(Event{Kind: EventMessageStart, MessageID: resp.ID})
		case "content_block_start":
			progressed = true
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				on(Event{Kind: EventTextDelta, MessageID: resp.ID, Index: int(ev.Index), Text: ev.Delta.Text})
			case "thinking_delta":
				on(Event{Kind: EventThinkingDelta, MessageID: resp.ID, Index: int(ev.Index), Text: ev.Delta.Thinking})
			}
		case "content_block_stop":
			b, raw, ok := blockOf(msg.Content[ev.Index], rawInput)
			if !ok {
				continue
			}
			resp.Content = append(resp.Content, b)
			on(Event{Kind: EventBlockComplete, MessageID: resp.ID, Index: int(ev.Index), Block: &b, RawInput: raw})
		case "message_delta":
			resp.StopReason = StopReason(msg.StopReason)
			resp.StopSequence = msg.StopSequence
			// Our own usage update, not the accumulated one: the SDK takes
			// any count message_delta carries, a zero too, which would erase
			// the count message_start gave. No message has zero input
			// tokens: a zero means "not reported".
			resp.Usage.OutputTokens = ev.Usage.OutputTokens
			if ev.Usage.JSON.InputTokens.Valid() && ev.Usage.InputTokens > 0 {
				resp.Usage.InputTokens = ev.Usage.InputTokens
			}
			if ev.Usage.JSON.CacheReadInputTokens.Valid() && ev.Usage.CacheReadInputTokens > 0 {
				resp.Usage.CacheReadInputTokens = ev.Usage.CacheReadInputTokens
			}
			if ev.Usage.JSON.CacheCreationInputTokens.Valid() && ev.Usage.CacheCreationInputTokens > 0 {
				resp.Usage.CacheCreationInputTokens = ev.Usage.CacheCreationInputTokens
			}
		case "message_stop":
			resp.Complete = true
		}
	}
	if err := stream.Err(); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
			err = fmt.Errorf("%w: %w", ErrStreamCut, errIdle)
		} else if ctx.Err() != nil {
			err = cause
		} else {
			err = classify(err)
			if progressed && !isAPIError(err) {
				err = fmt.Errorf("%w (%w)", ErrStreamCut, err)
			}
		}
		return resp, progressed, err
	}
	if !resp.Complete {
		return resp, progressed, fmt.Errorf("%w (stream ended before message_stop)", ErrStreamCut)
	}
	return resp, progressed, nil
}

// blockOf turns a content block that arrived complete into a Block. Server
// tools' blocks (and any other kind this package does not model) and text
// with citations keep their JSON as the API sent it, to be sent back
// unchanged; ok is false only for a block without JSON. rawInput is a tool_use's input as the model streamed it, which
// may not be JSON: the Block then carries an empty object and the raw text
// goes to the executor.
func blockOf(cb anthropic.ContentBlockUnion, rawInput string) (b Block, raw string, ok bool) {
	b = Block{Type: BlockType(cb.Type)}
	switch b.Type {
	case BlockText:
		b.Text = cb.Text
		if len(cb.Citations) > 0 {
			b.Raw = json.RawMessage(cb.RawJSON())
		}
	case BlockThinking:
		b.Thinking, b.Signature = cb.Thinking, cb.Signature
	case BlockRedactedThinking:
		b.Data = cb.Data
	case BlockToolUse:
		b.ID, b.Name = cb.ID, cb.Name
		raw = rawInput
		if raw == "" {
			raw = "{}"
		}
		b.Input = json.RawMessage(`{}`)
		if isJSONObject(raw) {
			b.Input = json.RawMessage(raw)
		}
	default:
		r := cb.RawJSON()
		if r == "" || !json.Valid([]byte(r)) {
			return Block{}, "", false
		}
		b.Raw = json.RawMessage(r)
	}
	return b, raw, true
}

func isJSONObject(s string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}

func isAPIError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae)
}

// classify turns an SDK error into an *APIError where the API answered.
func classify(err error) error {
	var se *anthropic.Error
	if !errors.As(err, &se) {
		return err
	}
	ae := &APIError{StatusCode: se.StatusCode, Type: string(se.Type()), RequestID: se.RequestID}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(se.RawJSON()), &body) == nil {
		ae.Message = body.Error.Message
		if ae.Type == "" {
			ae.Type = body.Error.Type
		}
	}
	if se.Response != nil {
		ae.RetryAfter = retryAfter(se.Response.Header)
	}
	return ae
}

func retryAfter(h http.Header) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		var ms float64
		if _, err := fmt.Sscanf(v, "%g", &ms); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("retry-after"); v != "" {
		var s float64
		if _, err := fmt.Sscanf(v, "%g", &s); err == nil && s > 0 {
			return time.Duration(s * float64(time.Second))
		}
	}
	return 0
}
