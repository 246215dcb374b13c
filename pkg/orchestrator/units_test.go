package orchestrator

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/tool"
)

func TestEventLogOrderAndBacklog(t *testing.T) {
	l := newEventLog(4)
	for i := 0; i < 3; i++ {
		l.publish(Event{Kind: EventText, Text: string(rune('a' + i))})
	}
	sub := &Subscription{log: l, after: 1}
	ctx := context.Background()
	for _, want := range []string{"b", "c"} {
		ev, err := sub.Next(ctx)
		if err != nil || ev.Text != want {
			t.Fatalf("Next = %+v, %v; want %q", ev, err, want)
		}
	}
	// A reader waiting for the next event is woken by publish.
	got := make(chan Event, 1)
	go func() {
		ev, _ := sub.Next(ctx)
		got <- ev
	}()
	l.publish(Event{Kind: EventText, Text: "d"})
	if ev := <-got; ev.Seq != 4 || ev.Text != "d" {
		t.Fatalf("woken with %+v", ev)
	}
	// A reader that fell behind the backlog skips to the oldest held event.
	for i := 0; i < 6; i++ {
		l.publish(Event{Kind: EventText})
	}
	late := &Subscription{log: l, after: 0}
	ev, err := late.Next(ctx)
	if err != nil || ev.Seq != 7 {
		t.Fatalf("late reader got seq %d (%v), want 7 (oldest of 4 held of 10)", ev.Seq, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	sub2 := &Subscription{log: l, after: l.last()}
	if _, err := sub2.Next(cctx); err == nil {
		t.Fatal("Next returned without an event")
	}
}

func TestToolPool(t *testing.T) {
	var defs []execapi.ToolInfo
	for _, name := range []string{"mcp__b__x", "Write", "Bash", "mcp__a__y", "Read", "Glob", "TaskOutput", "TaskStop"} {
		defs = append(defs, execapi.ToolInfo{Spec: tool.Spec{Name: name}})
	}
	defs[0].InputSchema = json.RawMessage(`{"type":"object"}`)
	names := func(allowed, disallowed []string) []string {
		var out []string
		for _, t := range toolPool(defs, allowed, disallowed) {
			out = append(out, t.Name)
		}
		return out
	}
	tests := []struct {
		name                string
		allowed, disallowed []string
		want                []string
	}{
		{"all, built-ins first", nil, nil, []string{"Bash", "Glob", "Read", "TaskOutput", "TaskStop", "Write", "mcp__a__y", "mcp__b__x"}},
		{"disallowed removed", nil, []string{"Write", "Bash(rm:*)"}, []string{"Bash", "Glob", "Read", "TaskOutput", "TaskStop", "mcp__a__y", "mcp__b__x"}},
		{"allowed only", []string{"Read", "Glob", "mcp__b__x"}, nil, []string{"Glob", "Read", "mcp__b__x"}},
		{"rules with specifiers do not filter", []string{"Bash(git:*)"}, nil, []string{"Bash", "Glob", "Read", "TaskOutput", "TaskStop", "Write", "mcp__a__y", "mcp__b__x"}},
		{"Bash brings its background-task tools", []string{"Bash", "Read"}, nil, []string{"Bash", "Read", "TaskOutput", "TaskStop"}},
		{"unless they are disallowed", []string{"Bash"}, []string{"TaskStop"}, []string{"Bash", "TaskOutput"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(tt.allowed, tt.disallowed); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("pool = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestToolResultBlock(t *testing.T) {
	result := func(id string, r tool.Result) *execapi.CallResult {
		return &execapi.CallResult{ToolUseID: id, Result: &r}
	}
	text := func(s string) tool.Content { return tool.Content{Text: s} }
	img := tool.Content{MediaType: "image/png", Data: []byte{0, 0, 0}}
	tests := []struct {
		name string
		r    *execapi.CallResult
		want string
	}{
		{"text, is_error unset", result("a", tool.Result{Content: []tool.Content{text("1\tx")}}),
			`{"type":"tool_result","tool_use_id":"a","content":"1\tx"}`},
		{"bash success states is_error false", result("b", tool.Result{Content: []tool.Content{text("ok")}, StateIsError: true}),
			`{"type":"tool_result","tool_use_id":"b","content":"ok","is_error":false}`},
		{"error", result("c", tool.Result{Content: []tool.Content{text("<tool_use_error>no</tool_use_error>")}, IsError: true}),
			`{"type":"tool_result","tool_use_id":"c","content":"<tool_use_error>no</tool_use_error>","is_error":true}`},
		{"image as a list", result("d", tool.Result{Content: []tool.Content{img}}),
			`{"type":"tool_result","tool_use_id":"d","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}`},
		{"two texts as a list", result("e", tool.Result{Content: []tool.Content{text("a"), text("b")}}),
			`{"type":"tool_result","tool_use_id":"e","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(ToolResultBlock(tt.r))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestNotificationText(t *testing.T) {
	code := 5
	got := notificationText(&tool.TaskNotice{
		TaskID: "b1", ToolUseID: "toolu_1", OutputPath: "/tmp/o", Status: "failed", ExitCode: &code,
		Summary: `Background command "x" failed with exit code 5`,
	})
	want := "<task-notification>\n<task-id>b1</task-id>\n<tool-use-id>toolu_1</tool-use-id>\n<output-file>/tmp/o</output-file>\n" +
		"<status>failed</status>\n<summary>Background command \"x\" failed with exit code 5</summary>\n</task-notification>"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// The MCP tools offered: sorted, minus those a bare disallowed rule names
// (the tool, its server, its server with "__*"); allowed names restrict
// them only when some are MCP rules.
func TestMCPPool(t *testing.T) {
	specs := []tool.Spec{{Name: "mcp__b__two"}, {Name: "mcp__a__one"}, {Name: "mcp__b__one"}, {Name: "mcp__ab__x"}}
	names := func(ts []model.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	for _, tt := range []struct {
		allowed, disallowed, want []string
	}{
		{nil, nil, []string{"mcp__a__one", "mcp__ab__x", "mcp__b__one", "mcp__b__two"}},
		{nil, []string{"mcp__a"}, []string{"mcp__ab__x", "mcp__b__one", "mcp__b__two"}},
		{nil, []string{"mcp__b__*", "Bash"}, []string{"mcp__a__one", "mcp__ab__x"}},
		{nil, []string{"mcp__b__one", "mcp__b(x)"}, []string{"mcp__a__one", "mcp__ab__x", "mcp__b__two"}},
		{[]string{"Read", "Bash"}, nil, []string{"mcp__a__one", "mcp__ab__x", "mcp__b__one", "mcp__b__two"}},
		{[]string{"Read", "mcp__b"}, []string{"mcp__b__two"}, []string{"mcp__b__one"}},
	} {
		if got := names(mcpPool(specs, tt.allowed, tt.disallowed)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("allowed %v, disallowed %v: %v, want %v", tt.allowed, tt.disallowed, got, tt.want)
		}
	}
}

// The breakpoint goes on the last built-in tool, and the MCP tools follow.
func TestOfferBreakpoint(t *testing.T) {
	got := offer([]model.Tool{{Name: "Bash"}, {Name: "Read"}}, []model.Tool{{Name: "mcp__a__x"}})
	want := []model.Tool{{Name: "Bash"}, {Name: "Read", CacheBreakpoint: true}, {Name: "mcp__a__x"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("offer = %+v", got)
	}
	if got := offer(nil, []model.Tool{{Name: "mcp__a__x"}}); len(got) != 1 || got[0].CacheBreakpoint {
		t.Errorf("no built-ins: %+v (the model client marks the last tool)", got)
	}
}
