package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
)

// TestBodyMatchesTheSDKs checks that the request body built from encoded
// messages is the one the SDK builds from all of them, plus "stream".
func TestBodyMatchesTheSDKs(t *testing.T) {
	c, err := New(Config{APIKey: "test", Model: "claude-test", ThinkingBudget: 1024, MaxTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	isErr := true
	msgs := []Message{
		{Role: RoleUser, Content: []Block{TextBlock("read it")}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockThinking, Thinking: "hm", Signature: "sig"},
			{Type: BlockToolUse, ID: "toolu_1", Name: "Read", Input: json.RawMessage(`{"file_path":"/a"}`)}}},
		{Role: RoleUser, Content: []Block{ToolResultBlock("toolu_1", []Block{TextBlock("1\tx")}, &isErr)}},
		{Role: RoleAssistant, Content: []Block{TextBlock("done")}},
		{Role: RoleUser, Content: []Block{TextBlock("again")}},
	}
	req := Request{Model: "claude-test", MaxTokens: 4096, System: "be brief",
		Tools: []Tool{{Name: "Read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object", "required": ["file_path"]}`)},
			{Name: "Bash", Description: "runs"}},
		WebSearch: &WebSearch{MaxUses: 3},
		Messages:  msgs}
	var encoded []json.RawMessage
	for _, m := range msgs[:len(msgs)-1] {
		raw, err := EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, raw)
	}
	// None encoded, some, all but the newest, and all with a stale
	// encoding of the newest, which must not be used: the newest carries
	// the cache breakpoint.
	for _, given := range [][]json.RawMessage{nil, encoded[:2], encoded,
		append(slices.Clone(encoded), json.RawMessage(`{"role":"user","content":"stale"}`))} {
		req.Encoded = given
		checkBody(t, c, req)
	}
	// What the caller gave goes in as it is, not encoded again.
	spaced := append(json.RawMessage(`{ `), encoded[1][1:]...)
	req.Encoded = append([]json.RawMessage{encoded[0], spaced}, encoded[2:]...)
	if _, _, got := sentBody(t, c, req); !bytes.Contains(got, spaced) {
		t.Errorf("body does not hold the given encoding %.40s", spaced)
	}
}

// checkBody compares body's JSON for req with the SDK's encoding of the
// same request.
func checkBody(t *testing.T, c *Client, req Request) {
	t.Helper()
	msgs := req.Messages
	p, _, got := sentBody(t, c, req)
	// The SDK's encoding of the same request: its own web search tool,
	// the tools as the API takes them, the messages.
	p.Tools = []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{MaxUses: anthropic.Int(3)}},
		param.Override[anthropic.ToolUnionParam](json.RawMessage(`{"name":"Read","description":"reads","input_schema":{"type":"object","required":["file_path"]}}`)),
		param.Override[anthropic.ToolUnionParam](json.RawMessage(`{"name":"Bash","description":"runs","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}`))}
	for _, m := range withCacheBreakpoint(msgs) {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		p.Messages = append(p.Messages, param.Override[anthropic.MessageParam](json.RawMessage(raw)))
	}
	sdk, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var want, have map[string]any
	if err := json.Unmarshal(sdk, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &have); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	want["stream"] = true
	if !reflect.DeepEqual(have, want) {
		t.Errorf("body\n%s\nwant (the SDK's)\n%s", got, sdk)
	}
	if n := bytes.Count(got, []byte(`"messages"`)); n != 1 {
		t.Errorf("body has %d messages keys: %s", n, got)
	}
	if !bytes.HasPrefix(got, []byte(`{"stream":true,`)) {
		t.Errorf("body does not start with stream: %.60s", got)
	}
	if len(have["messages"].([]any)) != len(msgs) || have["system"] == nil || have["tools"] == nil || have["thinking"] == nil {
		t.Errorf("body lacks a part: %s", got)
	}
}

// TestToolJSONFollowsEveryChange encodes a tool, then tools that differ
// from it in one part each: the cache gives each its own JSON, and the
// first one again unchanged.
func TestToolJSONFollowsEveryChange(t *testing.T) {
	var tc toolCache
	base := Tool{Name: "Read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object"}`)}
	first, err := tc.encode(base, false)
	if err != nil {
		t.Fatal(err)
	}
	variants := []struct {
		tool       Tool
		breakpoint bool
		want       string
	}{
		{base, false, `{"name":"Read","description":"reads","input_schema":{"type":"object"}}`},
		{Tool{Name: "Read2", Description: "reads", InputSchema: base.InputSchema}, false, `{"name":"Read2","description":"reads","input_schema":{"type":"object"}}`},
		{Tool{Name: "Read", Description: "reads files", InputSchema: base.InputSchema}, false, `{"name":"Read","description":"reads files","input_schema":{"type":"object"}}`},
		{Tool{Name: "Read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`)}, false, `{"name":"Read","description":"reads","input_schema":{"type":"object","required":["x"]}}`},
		{base, true, `{"name":"Read","description":"reads","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}`},
		{Tool{Name: "Read", Description: "reads"}, false, `{"name":"Read","description":"reads","input_schema":{"type":"object"}}`},
	}
	for _, v := range variants {
		got, err := tc.encode(v.tool, v.breakpoint)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != v.want {
			t.Errorf("encode(%+v, %v) = %s, want %s", v.tool, v.breakpoint, got, v.want)
		}
	}
	if again, _ := tc.encode(base, false); string(again) != string(first) {
		t.Errorf("the first tool again: %s, want %s", again, first)
	}
	for i := range maxCachedTools + 1 {
		if _, err := tc.encode(Tool{Name: fmt.Sprint("t", i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(tc.raw); n > maxCachedTools {
		t.Errorf("the cache holds %d tools, more than %d", n, maxCachedTools)
	}
}

// TestBodyReadInPieces reads bodies in reads of every size: with and
// without tools, with none, some and all messages encoded earlier.
func TestBodyReadInPieces(t *testing.T) {
	c, err := New(Config{APIKey: "test", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{
		{Role: RoleUser, Content: []Block{TextBlock("one")}},
		{Role: RoleAssistant, Content: []Block{TextBlock("two")}},
		{Role: RoleUser, Content: []Block{TextBlock("three")}},
	}
	first, err := EncodeMessage(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tools := range [][]Tool{nil, {{Name: "Read"}, {Name: "Bash"}}} {
		for _, req := range []Request{
			{Messages: msgs[:1]},
			{Messages: msgs},
			{Messages: msgs, Encoded: []json.RawMessage{first}},
		} {
			req.Tools, req.Model, req.MaxTokens = tools, "claude-test", 10
			_, b, whole := sentBody(t, c, req)
			if !json.Valid(whole) {
				t.Fatalf("not JSON: %s", whole)
			}
			if err := iotest.TestReader(b.reader(), whole); err != nil {
				t.Errorf("%d tools, %d messages: %v", len(tools), len(req.Messages), err)
			}
		}
	}
}

// sentBody builds req's parameters and body, and reads the body whole as
// the transport does; the length read must be the body's size.
func sentBody(t *testing.T, c *Client, req Request) (anthropic.MessageNewParams, *requestBody, []byte) {
	t.Helper()
	p, tools, err := c.params(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := body(p, tools, req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(b.reader())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) != b.size {
		t.Fatalf("body size %d, %d bytes read", b.size, len(raw))
	}
	return p, b, raw
}
