package orchestrator

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/schema"
)

// ToolResultBlock converts an executor Result into the tool_result block sent
// to the model: its text and image blocks, is_error only where the Result
// states it.
func ToolResultBlock(r *executorv1.Result) model.Block {
	var content []model.Block
	for _, c := range r.GetContent() {
		switch {
		case c.GetImage() != nil:
			content = append(content, model.ImageBlock(c.GetImage().GetMediaType(), c.GetImage().GetDataBase64()))
		case c.GetDocument() != nil:
			content = append(content, model.DocumentBlock(c.GetDocument().GetMediaType(), c.GetDocument().GetDataBase64()))
		case c.GetText() != nil:
			content = append(content, model.TextBlock(c.GetText().GetText()))
		}
	}
	var isErr *bool
	if r.IsError != nil {
		v := r.GetIsError()
		isErr = &v
	}
	return model.ToolResultBlock(r.GetToolUseId(), content, isErr)
}

// maxMessageBytes is the largest message an Execute stream carries: the
// limit toolsvc (rpcserver.MaxMessageBytes) and the dialers of cmd set in
// both directions.
const maxMessageBytes = 16 << 20

// unsendable returns the result of a call the stream cannot carry (input
// that is not UTF-8, or a message past maxMessageBytes), or nil. Sending
// it would end the stream, and resending it after the resume would end
// the next one: the call gets its result here instead.
func unsendable(use *executorv1.ToolUse) *executorv1.Result {
	size := proto.Size(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: use}})
	if err := schema.Unsendable(use.GetName(), use.GetInputJson(), size, maxMessageBytes); err != nil {
		return syntheticResult(use.GetId(), use.GetName(), err.Error(), executorv1.Outcome_OUTCOME_INVALID_INPUT)
	}
	return nil
}

// syntheticResult is the Result the orchestrator writes itself for a call
// whose executor result cannot arrive.
func syntheticResult(id, name, text string, outcome executorv1.Outcome) *executorv1.Result {
	t := true
	return &executorv1.Result{
		ToolUseId: id,
		ToolName:  name,
		Content:   []*executorv1.ContentBlock{{Block: &executorv1.ContentBlock_Text{Text: &executorv1.TextBlock{Text: "<tool_use_error>" + text + "</tool_use_error>"}}}},
		IsError:   &t,
		Outcome:   outcome,
	}
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
func notificationText(n *executorv1.TaskNotification) string {
	var b strings.Builder
	b.WriteString("<task-notification>\n")
	fmt.Fprintf(&b, "<task-id>%s</task-id>\n", n.GetTaskId())
	if n.GetToolUseId() != "" {
		fmt.Fprintf(&b, "<tool-use-id>%s</tool-use-id>\n", n.GetToolUseId())
	}
	if n.GetOutputPath() != "" {
		fmt.Fprintf(&b, "<output-file>%s</output-file>\n", n.GetOutputPath())
	}
	fmt.Fprintf(&b, "<status>%s</status>\n", n.GetStatus())
	if n.GetSummary() != "" {
		fmt.Fprintf(&b, "<summary>%s</summary>\n", n.GetSummary())
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
