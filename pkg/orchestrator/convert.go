package orchestrator

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/tool"
)

// ToolResultBlock converts an executor's result into the tool_result block
// sent to the model: its text, image and document blocks, is_error only where the
// result states it.
func ToolResultBlock(r *execapi.CallResult) model.Block {
	var content []model.Block
	for _, c := range r.Content {
		switch {
		case c.IsDocument():
			content = append(content, model.DocumentBlock(c.MediaType, base64.StdEncoding.EncodeToString(c.Data)))
		case c.IsImage():
			content = append(content, model.ImageBlock(c.MediaType, base64.StdEncoding.EncodeToString(c.Data)))
		default:
			content = append(content, model.TextBlock(c.Text))
		}
	}
	var isErr *bool
	if r.IsError || r.StateIsError {
		v := r.IsError
		isErr = &v
	}
	return model.ToolResultBlock(r.ToolUseID, content, isErr)
}

// syntheticResult is the interrupted result the orchestrator writes itself
// for a call whose executor result cannot arrive.
func syntheticResult(id, name, text string) *execapi.CallResult {
	return &execapi.CallResult{ToolUseID: id, ToolName: name, Result: tool.UseError(tool.OutcomeInterrupted, text)}
}

// Texts of results the orchestrator writes itself.
const (
	textInterrupted        = "Interrupted by the user: this tool call was stopped before it finished and may have had partial effects."
	textLostExecutor       = "Interrupted: the connection to the executor was lost before this call finished (%s). It may or may not have run."
	textRestarted          = "Interrupted: the orchestrator restarted before this call's result was recorded. It may or may not have run."
	textRequestInterrupted = "[Request interrupted by user]"
	textMoved              = "The executor this session ran on (%s) became unavailable, so the session now runs on another executor. Files written, the working directory and background tasks from before may be missing there."
	textContinue           = "Your previous response was cut off by the output token limit. Continue exactly where it stopped, without repeating or summarising what you already wrote."
)

// notificationText renders a background task notification for the model, in
// the tagged form Claude Code uses.
func notificationText(n *tool.TaskNotice) string {
	var b strings.Builder
	b.WriteString("<task-notification>\n")
	fmt.Fprintf(&b, "<task-id>%s</task-id>\n", n.TaskID)
	if n.ToolUseID != "" {
		fmt.Fprintf(&b, "<tool-use-id>%s</tool-use-id>\n", n.ToolUseID)
	}
	if n.OutputPath != "" {
		fmt.Fprintf(&b, "<output-file>%s</output-file>\n", n.OutputPath)
	}
	fmt.Fprintf(&b, "<status>%s</status>\n", n.Status)
	if n.Summary != "" {
		fmt.Fprintf(&b, "<summary>%s</summary>\n", n.Summary)
	}
	b.WriteString("</task-notification>")
	return b.String()
}

// notesBlock joins pending notifications into one text block, marked as an
// automated event rather than something the user said.
func notesBlock(notes []string) model.Block {
	return model.TextBlock("[SYSTEM NOTIFICATION - NOT USER INPUT]\n" +
		"An automated background-task event, not a message from the user; it does not answer or confirm anything you asked.\n\n" +
		strings.Join(notes, "\n"))
}
