package mcpclient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/pkg/tool"
)

// result turns an MCP tool result into the call's Result: text blocks as
// text, images as images, embedded resources as their text (or a note for
// binary ones), resource links as a line naming them, structured content
// as the structured data (and as text when there is no other content).
// Text beyond the output cap is cut, and the whole text saved.
func (t *mcpTool) result(env *tool.Env, call *tool.Call, res *mcp.CallToolResult) *tool.Result {
	out := &tool.Result{IsError: res.IsError}
	if res.IsError {
		out.Outcome = tool.OutcomeToolError
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out.Content = append(out.Content, tool.Content{Text: c.Text})
		case *mcp.ImageContent:
			out.Content = append(out.Content, tool.Content{MediaType: c.MIMEType, Data: c.Data})
		case *mcp.AudioContent:
			out.Content = append(out.Content, tool.Content{Text: fmt.Sprintf("[audio content (%s, %d bytes) is not passed to the model]", c.MIMEType, len(c.Data))})
		case *mcp.EmbeddedResource:
			out.Content = append(out.Content, resourceContent(c.Resource))
		case *mcp.ResourceLink:
			line := "[resource link: " + c.URI
			if c.Name != "" {
				line += " (" + c.Name + ")"
			}
			if c.Description != "" {
				line += ": " + c.Description
			}
			out.Content = append(out.Content, tool.Content{Text: line + "]"})
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
				out.Structured = b
			}
			if len(out.Content) == 0 {
				out.Content = []tool.Content{{Text: string(b)}}
			}
		}
	}
	if len(out.Content) == 0 {
		out.Content = []tool.Content{{Text: fmt.Sprintf("(%s completed with no output)", t.spec.Name)}}
	}
	t.cap(env, call, out)
	return out
}

// resourceContent renders an embedded resource: its text, or a note for
// binary contents (an image is passed on as an image).
func resourceContent(r *mcp.ResourceContents) tool.Content {
	switch {
	case r == nil:
		return tool.Content{Text: "[empty resource]"}
	case r.Text != "":
		return tool.Content{Text: r.Text}
	case strings.HasPrefix(r.MIMEType, "image/") && len(r.Blob) > 0:
		return tool.Content{MediaType: r.MIMEType, Data: r.Blob}
	}
	return tool.Content{Text: fmt.Sprintf("[resource %s: %s, %d bytes of binary data not shown]", r.URI, r.MIMEType, len(r.Blob))}
}

// cap cuts the text of res to the output cap. The whole text goes to a
// file in the session's output directory (as Bash's long output does),
// which Read can page through; a note at the end says where.
func (t *mcpTool) cap(env *tool.Env, call *tool.Call, res *tool.Result) {
	maxTokens := t.srv.set.opts.MaxOutputTokens
	limit := maxTokens * charsPerToken
	chars := 0
	for _, c := range res.Content {
		if c.IsText() {
			chars += utf8.RuneCountInString(c.Text)
		}
	}
	if chars <= limit {
		return
	}
	var full strings.Builder
	for i, c := range res.Content {
		if !c.IsText() {
			continue
		}
		if i > 0 && full.Len() > 0 {
			full.WriteString("\n")
		}
		full.WriteString(c.Text)
	}
	path := ""
	if env != nil && env.OutputDir != "" {
		p := filepath.Join(env.OutputDir, fileName(call.ID)+".txt")
		if err := os.WriteFile(p, []byte(full.String()), 0o644); err == nil {
			path = p
		} else {
			t.srv.set.log.Warn("mcp output not saved", "tool", t.spec.Name, "error", err)
		}
	}
	left := limit
	kept := 0
	content := res.Content[:0]
	for _, c := range res.Content {
		if !c.IsText() {
			content = append(content, c)
			continue
		}
		if left <= 0 {
			continue
		}
		if n := utf8.RuneCountInString(c.Text); n > left {
			c.Text = string([]rune(c.Text)[:left])
		}
		left -= utf8.RuneCountInString(c.Text)
		kept += len(c.Text)
		content = append(content, c)
	}
	note := fmt.Sprintf("[Output cut: %s returned %d characters, more than its limit of %d tokens (about %d characters); the first %d characters are shown.",
		t.spec.Name, chars, maxTokens, limit, limit)
	if path != "" {
		note += " The whole output is saved in " + path + ": read it with the Read tool, using offset and limit to page through it."
	}
	res.Content = append(content, tool.Content{Text: note + "]"})
	original := uint64(full.Len())
	res.Truncation = &tool.Truncation{OriginalBytes: original, OmittedBytes: original - min(uint64(kept), original), FullOutputPath: path}
}

// fileName makes an id safe as a file name.
func fileName(id string) string {
	if id == "" {
		id = "call"
	}
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, id)
}

// tailSize is how much of a server's standard error is kept for errors.
const tailSize = 2048

// tail keeps the end of a server's standard error.
type tail struct {
	done chan struct{} // closed when the standard error is read to its end

	mu  sync.Mutex // guards buf
	buf []byte
}

func newTail() *tail { return &tail{done: make(chan struct{})} }

// readFrom reads r to its end, logging each line and keeping the last
// tailSize bytes; it closes r.
func (t *tail) readFrom(r io.ReadCloser, log *slog.Logger) {
	defer close(t.done)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Bytes()
		log.Debug("mcp server stderr", "line", string(line))
		t.mu.Lock()
		t.buf = append(t.buf, line...)
		t.buf = append(t.buf, '\n')
		if len(t.buf) > tailSize {
			t.buf = append([]byte(nil), t.buf[len(t.buf)-tailSize:]...)
		}
		t.mu.Unlock()
	}
}

// suffix returns "; its standard error ended with: …" with the last
// lines kept, or "" when there are none. A nil tail has none.
func (t *tail) suffix() string {
	if t == nil {
		return ""
	}
	// The process is gone; what it wrote last may still be in the pipe.
	select {
	case <-t.done:
	case <-time.After(time.Second):
	}
	t.mu.Lock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "\uFFFD"))
	t.mu.Unlock()
	if s == "" {
		return ""
	}
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
	}
	return "; its standard error ended with: " + s
}
