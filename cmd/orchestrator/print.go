package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
)

// printer writes a headless turn in one of the output formats: text (the
// final answer), json (one result object) or stream-json (one JSON object
// per line: init, each message, retries and errors, then the result).
type printer struct {
	format string
	w      io.Writer
	enc    *json.Encoder
	sess   *orchestrator.Session
	mode   string
	errs   []string
}

func newPrinter(format string, w io.Writer, sess *orchestrator.Session, mode string) *printer {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if mode == "" {
		mode = "default"
	}
	return &printer{format: format, w: w, enc: enc, sess: sess, mode: mode}
}

type obj = map[string]any

func (p *printer) emit(v any) {
	if p.format == "stream-json" {
		_ = p.enc.Encode(v)
	}
}

// follow reads the session's events until the turn completes.
func (p *printer) follow(ctx context.Context, sub *orchestrator.Subscription) {
	var names []string
	for _, t := range p.sess.Tools() {
		names = append(names, t.Name)
	}
	p.emit(obj{
		"type": "system", "subtype": "init", "session_id": p.sess.ID(), "model": p.sess.Info().Model,
		"tools": names, "cwd": p.sess.Workspace(), "permission_mode": p.mode,
	})
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return
		}
		switch ev.Kind {
		case orchestrator.EventMessage:
			p.message(ev)
		case orchestrator.EventRetry:
			p.emit(obj{
				"type": "system", "subtype": "api_retry", "session_id": p.sess.ID(),
				"attempt": ev.Retry.Attempt, "max_retries": ev.Retry.MaxRetries,
				"retry_delay_ms": ev.Retry.Delay.Milliseconds(), "error": ev.Retry.Err.Error(),
			})
		case orchestrator.EventError:
			p.errs = append(p.errs, ev.Error.Message)
			if ev.Error.Kind == "stream_cut" {
				// Shown like an assistant message, but never sent to the model.
				p.emit(obj{"type": "assistant", "session_id": p.sess.ID(), "synthetic": true, "message": obj{
					"role": "assistant", "content": []obj{{"type": "text", "text": model.ErrStreamCut.Error()}},
				}})
				continue
			}
			p.emit(obj{
				"type": "system", "subtype": "error", "session_id": p.sess.ID(),
				"kind": ev.Error.Kind, "message": ev.Error.Message, "recoverable": ev.Error.Recoverable,
			})
		case orchestrator.EventTaskNotification:
			n := ev.Notification
			p.emit(obj{
				"type": "system", "subtype": "task_notification", "session_id": p.sess.ID(),
				"task_id": n.GetTaskId(), "tool_use_id": n.GetToolUseId(), "status": n.GetStatus(),
				"output_file": n.GetOutputPath(), "summary": n.GetSummary(),
			})
		case orchestrator.EventTurnComplete:
			return
		}
	}
}

func (p *printer) message(ev orchestrator.Event) {
	m := ev.Message
	switch m.Role {
	case model.RoleAssistant:
		p.emit(obj{"type": "assistant", "session_id": p.sess.ID(), "message": obj{
			"id": ev.MessageID, "type": "message", "role": "assistant", "content": m.Content,
		}})
	case model.RoleUser:
		for _, b := range m.Content {
			if b.Type == model.BlockToolResult {
				p.emit(obj{"type": "user", "session_id": p.sess.ID(), "message": obj{"role": "user", "content": m.Content}})
				return
			}
		}
	}
}

// result writes the outcome of the turn.
func (p *printer) result(res *orchestrator.TurnResult) error {
	subtype, isErr := "success", false
	switch res.StopReason {
	case orchestrator.StopEndTurn, orchestrator.StopStopSequence:
	case orchestrator.StopMaxTurns:
		subtype, isErr = "error_max_turns", true
	case orchestrator.StopInterrupted:
		subtype, isErr = "error_interrupted", true
	case orchestrator.StopRefusal:
		subtype, isErr = "refusal", true
	default:
		subtype, isErr = "error_during_execution", true
	}
	errText := ""
	if res.Err != nil {
		errText = res.Err.Error()
	}
	if p.format == "text" {
		var err error
		switch {
		case !isErr:
			_, err = fmt.Fprintln(p.w, res.Text)
		case errText != "":
			_, err = fmt.Fprintf(p.w, "Error: %s\n", errText)
		default:
			_, err = fmt.Fprintf(p.w, "Error: the turn ended: %s\n", res.StopReason)
		}
		return err
	}
	out := obj{
		"type": "result", "subtype": subtype, "is_error": isErr, "result": res.Text,
		"session_id": p.sess.ID(), "num_turns": res.Requests, "duration_ms": res.Duration.Milliseconds(),
		"stop_reason": string(res.StopReason), "usage": res.Usage,
	}
	if errText != "" {
		out["error"] = errText
	}
	if len(p.errs) > 0 {
		out["errors"] = p.errs
	}
	return p.enc.Encode(out)
}
