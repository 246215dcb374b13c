package model_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolwire/toolwire/pkg/model"
)

func TestBlockJSONRoundTrip(t *testing.T) {
	f := false
	tests := []struct {
		name  string
		block model.Block
		wire  string
	}{
		{"text", model.TextBlock("hi"), `{"type":"text","text":"hi"}`},
		{"thinking", model.Block{Type: model.BlockThinking, Thinking: "hmm", Signature: "s"}, `{"type":"thinking","thinking":"hmm","signature":"s"}`},
		{"redacted", model.Block{Type: model.BlockRedactedThinking, Data: "xyz"}, `{"type":"redacted_thinking","data":"xyz"}`},
		{"tool_use", model.Block{Type: model.BlockToolUse, ID: "t", Name: "Read", Input: json.RawMessage(`{"file_path":"a"}`)},
			`{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"a"}}`},
		{"tool_result string", model.ToolResultBlock("t", []model.Block{model.TextBlock("ok")}, &f),
			`{"type":"tool_result","tool_use_id":"t","content":"ok","is_error":false}`},
		{"tool_result list", model.ToolResultBlock("t", []model.Block{model.ImageBlock("image/png", "AA")}, nil),
			`{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}`},
		{"tool_result document", model.ToolResultBlock("t", []model.Block{model.TextBlock("PDF"), model.DocumentBlock("application/pdf", "JVBE")}, nil),
			`{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"PDF"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}]}`},
		{"tool_result empty", model.ToolResultBlock("t", nil, nil), `{"type":"tool_result","tool_use_id":"t"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.block)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.wire {
				t.Fatalf("marshal:\n got %s\nwant %s", got, tt.wire)
			}
			var back model.Block
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tt.block) {
				t.Fatalf("round trip: %+v, want %+v", back, tt.block)
			}
		})
	}
	if _, err := json.Marshal(model.Block{Type: "server_tool_use"}); err == nil {
		t.Fatal("an unknown block type was encoded")
	}
}

func TestResponseMessageDropsBlankText(t *testing.T) {
	r := &model.Response{Content: []model.Block{
		model.TextBlock(""), model.TextBlock(" \n"),
		{Type: model.BlockToolUse, ID: "t", Name: "Bash", Input: json.RawMessage(`{}`)},
		model.TextBlock("done"),
	}}
	m := r.Message()
	if m.Role != model.RoleAssistant || len(m.Content) != 2 || m.Content[0].ID != "t" || m.Content[1].Text != "done" {
		t.Fatalf("message = %+v", m)
	}
}
