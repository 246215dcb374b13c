package model_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// jsonValue decodes raw for a comparison that ignores key order and
// spacing.
func jsonValue(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

// TestWebSearchPassesThrough: the web search tool is offered with its
// domains, and the server tool's blocks come back whole and go to the
// next request unchanged.
func TestWebSearchPassesThrough(t *testing.T) {
	search := fakeapi.ServerToolUse("srvtoolu_1", "web_search", map[string]any{"query": "toolwire release"})
	found := fakeapi.WebSearchResult("srvtoolu_1", fakeapi.SearchResult{URL: "https://docs.example.com/r", Title: "Release", PageAge: "1 day"})
	fake := fakeapi.New(t,
		fakeapi.EndTurn(search, found, fakeapi.Text("Version 2 is out.")),
		fakeapi.EndTurn(fakeapi.Text("ok")),
	)
	c := newClient(t, fake, nil)
	ctx := context.Background()
	req := model.Request{
		Messages:  userText("What is new?"),
		Tools:     []model.Tool{{Name: "Read", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		WebSearch: &model.WebSearch{MaxUses: 3, AllowedDomains: []string{"docs.example.com"}},
	}
	resp, err := c.Stream(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := fake.Requests()[0].Body.Tools
	if len(tools) != 2 || tools[0].Type != "web_search_20250305" || tools[0].Name != "web_search" || tools[0].MaxUses != 3 ||
		!reflect.DeepEqual(tools[0].AllowedDomains, []string{"docs.example.com"}) || tools[1].Name != "Read" {
		t.Fatalf("tools sent: %+v", tools)
	}
	msg := resp.Message()
	if len(msg.Content) != 3 || msg.Content[0].Type != model.BlockServerToolUse || msg.Content[1].Type != model.BlockWebSearchToolResult {
		t.Fatalf("response blocks: %+v", msg.Content)
	}
	if got, want := jsonValue(t, msg.Content[1].Raw), jsonValue(t, found.Raw); !reflect.DeepEqual(got, want) {
		t.Fatalf("web_search_tool_result:\n got %v\nwant %v", got, want)
	}

	// The transcript goes back: the blocks are sent as they came.
	req.Messages = append(req.Messages, msg, model.Message{Role: model.RoleUser, Content: []model.Block{model.TextBlock("Thanks")}})
	if _, err := c.Stream(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	sent := fake.Requests()[1].JSON["messages"].([]any)[1].(map[string]any)["content"].([]any)
	wantUse := map[string]any{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": map[string]any{"query": "toolwire release"}}
	if !reflect.DeepEqual(sent[0], wantUse) {
		t.Errorf("server_tool_use sent back as %v, want %v", sent[0], wantUse)
	}
	if !reflect.DeepEqual(sent[1], jsonValue(t, found.Raw)) {
		t.Errorf("web_search_tool_result sent back as %v, want %s", sent[1], found.Raw)
	}

	// Through a transcript file's JSON too.
	data, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var back model.Message
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if !reflect.DeepEqual(jsonValue(t, again), jsonValue(t, data)) || back.Content[1].Type != model.BlockWebSearchToolResult {
		t.Errorf("a decoded message encodes differently:\n%s\n%s", data, again)
	}

	// Both domain lists at once are refused before sending.
	req.WebSearch = &model.WebSearch{AllowedDomains: []string{"a.com"}, BlockedDomains: []string{"b.com"}}
	if _, err := c.Stream(ctx, req, nil); err == nil {
		t.Error("allowed and blocked domains together were sent")
	}
}
