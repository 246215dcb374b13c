package model

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

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
		Tools:    []Tool{{Name: "Read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		Messages: msgs}
	// All but the newest encoded, and a stale encoding of the newest, which
	// must not be used: the newest carries the cache breakpoint.
	for _, m := range msgs[:len(msgs)-1] {
		raw, err := EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		req.Encoded = append(req.Encoded, raw)
	}
	req.Encoded = append(req.Encoded, json.RawMessage(`{"role":"user","content":"stale"}`))

	p, err := c.params(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := body(p, req)
	if err != nil {
		t.Fatal(err)
	}
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
