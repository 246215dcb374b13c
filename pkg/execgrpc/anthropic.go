package execgrpc

import (
	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
)

// ToolResultBlock is an Anthropic Messages API tool_result block, ready for
// encoding/json.
type ToolResultBlock struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	// Content is a string for a single text block, else a list of blocks.
	Content any   `json:"content"`
	IsError *bool `json:"is_error,omitempty"`
}

// contentBlock is a text, image or document block inside a tool_result.
type contentBlock struct {
	Type   string        `json:"type"`
	Text   string        `json:"text,omitempty"`
	Source *base64Source `json:"source,omitempty"`
}

// base64Source is the source of an image or document block.
type base64Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// ToolResult converts a Result into the tool_result block Claude Code would
// send: the content as a plain string when it is one text block, a list of
// blocks otherwise; is_error only where the Result states it.
func ToolResult(r *executorv1.Result) ToolResultBlock {
	b := ToolResultBlock{Type: "tool_result", ToolUseID: r.GetToolUseId()}
	if r.IsError != nil {
		v := r.GetIsError()
		b.IsError = &v
	}
	blocks := r.GetContent()
	if len(blocks) == 1 && blocks[0].GetText() != nil {
		b.Content = blocks[0].GetText().GetText()
		return b
	}
	list := make([]contentBlock, 0, len(blocks))
	for _, c := range blocks {
		if img := c.GetImage(); img != nil {
			list = append(list, contentBlock{Type: "image", Source: &base64Source{Type: "base64", MediaType: img.GetMediaType(), Data: img.GetDataBase64()}})
			continue
		}
		if doc := c.GetDocument(); doc != nil {
			list = append(list, contentBlock{Type: "document", Source: &base64Source{Type: "base64", MediaType: doc.GetMediaType(), Data: doc.GetDataBase64()}})
			continue
		}
		list = append(list, contentBlock{Type: "text", Text: c.GetText().GetText()})
	}
	b.Content = list
	return b
}
