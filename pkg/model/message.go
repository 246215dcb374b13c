package model

import (
	"encoding/json"
	"fmt"
)

// Role is the author of a message.
type Role string

// The roles of the Messages API.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType names a content block kind.
type BlockType string

// The content block kinds a conversation holds.
const (
	BlockText             BlockType = "text"
	BlockThinking         BlockType = "thinking"
	BlockRedactedThinking BlockType = "redacted_thinking"
	BlockToolUse          BlockType = "tool_use"
	BlockToolResult       BlockType = "tool_result"
	BlockImage            BlockType = "image"
	BlockDocument         BlockType = "document"
	// BlockServerToolUse is a call of a tool the API runs itself (web
	// search); BlockWebSearchToolResult is its result. Both are kept as
	// the API sent them (Block.Raw) and sent back unchanged.
	BlockServerToolUse       BlockType = "server_tool_use"
	BlockWebSearchToolResult BlockType = "web_search_tool_result"
)

// Message is one message of a conversation, in the Messages API's shape. Its
// JSON form is exactly what the API takes, so a transcript can be stored and
// sent back as is.
type Message struct {
	// Role is who wrote it.
	Role Role `json:"role"`
	// Content holds its blocks, never empty in a valid transcript.
	Content []Block `json:"content"`
}

// UnmarshalJSON reads a message; content may also be a plain string, as the
// API allows.
func (m *Message) UnmarshalJSON(data []byte) error {
	var w struct {
		Role    Role            `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("model: decode message: %w", err)
	}
	*m = Message{Role: w.Role}
	var s string
	if err := json.Unmarshal(w.Content, &s); err == nil {
		m.Content = []Block{TextBlock(s)}
		return nil
	}
	if len(w.Content) == 0 || string(w.Content) == "null" {
		return nil
	}
	return json.Unmarshal(w.Content, &m.Content)
}

// ToolUses returns the tool_use blocks of m, in order.
func (m Message) ToolUses() []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// Text joins the text blocks of m.
func (m Message) Text() string {
	var s string
	for _, b := range m.Content {
		if b.Type == BlockText {
			s += b.Text
		}
	}
	return s
}

// ImageSource is the base64 source of an image block, and of a document
// block (media type "application/pdf").
type ImageSource struct {
	// Type is always "base64".
	Type string `json:"type"`
	// MediaType is e.g. "image/png" or "application/pdf".
	MediaType string `json:"media_type"`
	// Data is the standard base64 of the image or document bytes.
	Data string `json:"data"`
}

// Block is one content block. Which fields matter depends on Type; the JSON
// form carries only those, as the Messages API expects.
type Block struct {
	// Type is the block kind.
	Type BlockType
	// Text of a text block.
	Text string
	// Thinking text and Signature of a thinking block.
	Thinking, Signature string
	// Data of a redacted_thinking block.
	Data string
	// ID and Name of a tool_use block.
	ID, Name string
	// Input of a tool_use block: always a JSON object (input the model got
	// wrong is kept as {} here; the executor receives the raw text).
	Input json.RawMessage
	// ToolUseID of a tool_result block.
	ToolUseID string
	// Content of a tool_result block: text, image and document blocks. A
	// single text block is sent as a plain string, as Claude Code does.
	Content []Block
	// IsError of a tool_result block; nil leaves the key out.
	IsError *bool
	// Source of an image or document block.
	Source *ImageSource
	// Raw is the block's JSON exactly as the API sent it, for blocks that
	// are passed through rather than built: server tools' blocks
	// (server_tool_use, web_search_tool_result and other kinds this
	// package does not model) and text blocks with citations. A block with
	// Raw is encoded as Raw.
	Raw json.RawMessage

	// cache marks the block as a prompt-cache breakpoint when sent.
	cache bool
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Type: BlockText, Text: s} }

// ToolResultBlock returns a tool_result block.
func ToolResultBlock(toolUseID string, content []Block, isError *bool) Block {
	return Block{Type: BlockToolResult, ToolUseID: toolUseID, Content: content, IsError: isError}
}

// ImageBlock returns a base64 image block.
func ImageBlock(mediaType, base64Data string) Block {
	return Block{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: mediaType, Data: base64Data}}
}

// DocumentBlock returns a base64 document block, such as a PDF
// ("application/pdf"), which the API reads as text and page images.
func DocumentBlock(mediaType, base64Data string) Block {
	return Block{Type: BlockDocument, Source: &ImageSource{Type: "base64", MediaType: mediaType, Data: base64Data}}
}

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

// MarshalJSON writes the block in the Messages API's form.
func (b Block) MarshalJSON() ([]byte, error) {
	if len(b.Raw) > 0 {
		return b.Raw, nil
	}
	var cc *cacheControl
	if b.cache {
		cc = ephemeral
	}
	switch b.Type {
	case BlockText:
		return json.Marshal(struct {
			Type         BlockType     `json:"type"`
			Text         string        `json:"text"`
			CacheControl *cacheControl `json:"cache_control,omitempty"`
		}{b.Type, b.Text, cc})
	case BlockThinking:
		return json.Marshal(struct {
			Type      BlockType `json:"type"`
			Thinking  string    `json:"thinking"`
			Signature string    `json:"signature"`
		}{b.Type, b.Thinking, b.Signature})
	case BlockRedactedThinking:
		return json.Marshal(struct {
			Type BlockType `json:"type"`
			Data string    `json:"data"`
		}{b.Type, b.Data})
	case BlockToolUse:
		input := b.Input
		if len(input) == 0 || !json.Valid(input) {
			input = json.RawMessage(`{}`)
		}
		return json.Marshal(struct {
			Type         BlockType       `json:"type"`
			ID           string          `json:"id"`
			Name         string          `json:"name"`
			Input        json.RawMessage `json:"input"`
			CacheControl *cacheControl   `json:"cache_control,omitempty"`
		}{b.Type, b.ID, b.Name, input, cc})
	case BlockToolResult:
		var content any
		switch {
		case len(b.Content) == 1 && b.Content[0].Type == BlockText:
			content = b.Content[0].Text
		case len(b.Content) > 0:
			content = b.Content
		}
		return json.Marshal(struct {
			Type         BlockType     `json:"type"`
			ToolUseID    string        `json:"tool_use_id"`
			Content      any           `json:"content,omitempty"`
			IsError      *bool         `json:"is_error,omitempty"`
			CacheControl *cacheControl `json:"cache_control,omitempty"`
		}{b.Type, b.ToolUseID, content, b.IsError, cc})
	case BlockImage, BlockDocument:
		return json.Marshal(struct {
			Type         BlockType     `json:"type"`
			Source       *ImageSource  `json:"source"`
			CacheControl *cacheControl `json:"cache_control,omitempty"`
		}{b.Type, b.Source, cc})
	default:
		return nil, fmt.Errorf("model: cannot encode content block of type %q", b.Type)
	}
}

// UnmarshalJSON reads a block in the Messages API's form.
func (b *Block) UnmarshalJSON(data []byte) error {
	var w struct {
		Type      BlockType       `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   *bool           `json:"is_error"`
		Source    *ImageSource    `json:"source"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("model: decode content block: %w", err)
	}
	*b = Block{
		Type: w.Type, Text: w.Text, Thinking: w.Thinking, Signature: w.Signature, Data: w.Data,
		ID: w.ID, Name: w.Name, Input: w.Input, ToolUseID: w.ToolUseID, IsError: w.IsError, Source: w.Source,
	}
	if passedThrough(w.Type, data) {
		b.Raw = append(json.RawMessage(nil), data...)
		return nil
	}
	if len(w.Content) > 0 && string(w.Content) != "null" {
		var s string
		if err := json.Unmarshal(w.Content, &s); err == nil {
			b.Content = []Block{TextBlock(s)}
		} else if err := json.Unmarshal(w.Content, &b.Content); err != nil {
			return fmt.Errorf("model: decode tool_result content: %w", err)
		}
	}
	return nil
}

// passedThrough reports whether a block of type t, whose JSON is data, is
// kept as it came: a kind of block this package does not build (server
// tools' blocks), or a text block with citations.
func passedThrough(t BlockType, data []byte) bool {
	switch t {
	case BlockText:
		var c struct {
			Citations json.RawMessage `json:"citations"`
		}
		return json.Unmarshal(data, &c) == nil && len(c.Citations) > 0 && string(c.Citations) != "null" && string(c.Citations) != "[]"
	case BlockThinking, BlockRedactedThinking, BlockToolUse, BlockToolResult, BlockImage, BlockDocument:
		return false
	}
	return true
}

// withCacheBreakpoint returns a copy of msgs whose newest message's last block
// carries a prompt-cache breakpoint.
func withCacheBreakpoint(msgs []Message) []Message {
	if len(msgs) == 0 {
		return msgs
	}
	out := make([]Message, len(msgs))
	copy(out, msgs)
	last := out[len(out)-1]
	// Thinking blocks cannot carry cache_control, and blocks passed
	// through are sent as they came; walk back to one that can.
	for i := len(last.Content) - 1; i >= 0; i-- {
		switch last.Content[i].Type {
		case BlockThinking, BlockRedactedThinking:
			continue
		}
		if len(last.Content[i].Raw) > 0 {
			continue
		}
		content := make([]Block, len(last.Content))
		copy(content, last.Content)
		content[i].cache = true
		last.Content = content
		out[len(out)-1] = last
		break
	}
	return out
}
