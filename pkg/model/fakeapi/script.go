package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/toolwire/toolwire/pkg/model"
)

// Responder chooses the reply to one request. It runs on the server's
// handler goroutine, so it may block (e.g. until the test has checked the
// request) as long as it honours the request's context.
type Responder func(r *Request) Reply

// Reply is the answer to one request: an HTTP error when Status is set,
// otherwise a streamed assistant message.
type Reply struct {
	// Status, when non-zero, answers with this HTTP status and the API's
	// JSON error body instead of a stream.
	Status int
	// ErrorType is the error body's type, e.g. "overloaded_error".
	ErrorType string
	// ErrorMessage is the error body's message.
	ErrorMessage string
	// RetryAfter, when set, is sent as the retry-after header.
	RetryAfter string

	// Message is the assistant message to stream.
	Message Turn
}

// Turn is a scripted assistant message.
type Turn struct {
	// ID is the message id; empty picks "msg_fake_<n>".
	ID string
	// Blocks are streamed in order.
	Blocks []Block
	// StopReason defaults to "tool_use" when a block is a tool_use and to
	// "end_turn" otherwise.
	StopReason string
	// Usage is reported in message_start (input) and message_delta (output);
	// zero picks small fixed numbers.
	Usage model.Usage
	// Cut breaks the connection after CutAfter complete blocks, in the
	// middle of the next block if there is one, so that neither
	// message_delta nor message_stop arrive.
	Cut bool
	// CutAfter is the number of blocks sent whole before a Cut.
	CutAfter int
	// ErrorEvent, when set, is sent as an SSE "error" event after CutAfter
	// blocks instead of cutting the connection (e.g. "overloaded_error").
	ErrorEvent string
	// WaitBeforeStop blocks message_delta until it is closed.
	WaitBeforeStop <-chan struct{}
}

// Block is a scripted content block.
type Block struct {
	// Type is "text", "tool_use", "thinking", "server_tool_use" (streamed
	// like tool_use) or any other type given whole in Raw (such as
	// "web_search_tool_result").
	Type string
	// Text of a text block.
	Text string
	// Thinking and Signature of a thinking block.
	Thinking, Signature string
	// ID and Name of a tool_use block.
	ID, Name string
	// Input of a tool_use or server_tool_use block: the JSON text the
	// model "writes", streamed in pieces. It need not be valid JSON.
	Input string
	// Raw is the whole content block of a type without deltas, sent as
	// it is in content_block_start (a web_search_tool_result).
	Raw json.RawMessage
	// Pause sleeps before the block starts.
	Pause time.Duration
	// Wait blocks the start of the block until it is closed.
	Wait <-chan struct{}
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// Thinking returns a thinking block.
func Thinking(text, signature string) Block {
	return Block{Type: "thinking", Thinking: text, Signature: signature}
}

// ToolUse returns a tool_use block. A string input is taken as the raw JSON
// text the model writes (so invalid JSON can be scripted); anything else is
// encoded as JSON.
func ToolUse(id, name string, input any) Block {
	var raw string
	switch v := input.(type) {
	case string:
		raw = v
	case json.RawMessage:
		raw = string(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic("fakeapi: tool input does not encode: " + err.Error())
		}
		raw = string(b)
	}
	return Block{Type: "tool_use", ID: id, Name: name, Input: raw}
}

// ServerToolUse returns a server_tool_use block: a call of a tool the API
// runs itself, such as "web_search" with {"query": "..."}.
func ServerToolUse(id, name string, input any) Block {
	b := ToolUse(id, name, input)
	b.Type = "server_tool_use"
	return b
}

// SearchResult is one result of a scripted web search.
type SearchResult struct {
	URL, Title, PageAge string
}

// WebSearchResult returns a web_search_tool_result block for the
// server_tool_use toolUseID, with results in the API's shape (each with an
// encrypted_content the client must send back unchanged).
func WebSearchResult(toolUseID string, results ...SearchResult) Block {
	content := make([]map[string]any, 0, len(results))
	for i, r := range results {
		content = append(content, map[string]any{
			"type": "web_search_result", "url": r.URL, "title": r.Title, "page_age": r.PageAge,
			"encrypted_content": fmt.Sprintf("enc_%s_%d", toolUseID, i),
		})
	}
	raw, err := json.Marshal(map[string]any{"type": "web_search_tool_result", "tool_use_id": toolUseID, "content": content})
	if err != nil {
		panic("fakeapi: web search result does not encode: " + err.Error())
	}
	return Block{Type: "web_search_tool_result", Raw: raw}
}

// Message returns a reply streaming blocks with the default stop reason.
func Message(blocks ...Block) Reply { return Reply{Message: Turn{Blocks: blocks}} }

// EndTurn returns a reply that ends the turn with blocks.
func EndTurn(blocks ...Block) Reply {
	return Reply{Message: Turn{Blocks: blocks, StopReason: "end_turn"}}
}

// ToolTurn returns a reply with stop reason tool_use.
func ToolTurn(blocks ...Block) Reply {
	return Reply{Message: Turn{Blocks: blocks, StopReason: "tool_use"}}
}

// MaxTokens returns a reply that stops at the output limit.
func MaxTokens(blocks ...Block) Reply {
	return Reply{Message: Turn{Blocks: blocks, StopReason: "max_tokens"}}
}

// Overloaded returns a 529 overloaded_error reply.
func Overloaded() Reply {
	return Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}
}

// RateLimited returns a 429 rate_limit_error reply.
func RateLimited() Reply {
	return Reply{Status: http.StatusTooManyRequests, ErrorType: "rate_limit_error", ErrorMessage: "Number of request tokens has exceeded your per-minute rate limit"}
}

// ServerError returns a 500 api_error reply.
func ServerError() Reply {
	return Reply{Status: http.StatusInternalServerError, ErrorType: "api_error", ErrorMessage: "Internal server error"}
}

// Cut returns a reply that streams blocks and breaks the connection after
// the first after of them.
func Cut(after int, blocks ...Block) Reply {
	return Reply{Message: Turn{Blocks: blocks, Cut: true, CutAfter: after}}
}

// Static returns a Responder that always gives reply.
func Static(reply Reply) Responder { return func(*Request) Reply { return reply } }
