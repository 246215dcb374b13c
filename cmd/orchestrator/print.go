package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/tool"
)

// printer writes a headless turn in one of the output formats: text (the
// final answer), json (one result object) or stream-json (one JSON object
// per line: init, each message, retries and errors, then the result). On
// stderr it shows, with --verbose, every tool call with its output as it
// comes, and otherwise, in text mode on a terminal, one status line of the
// running calls, rewritten in place.
type printer struct {
	format  string
	w       io.Writer
	enc     *json.Encoder
	sess    *orchestrator.Session
	verbose io.Writer   // tool calls and output; nil without --verbose
	status  *statusLine // nil unless stderr is a terminal in text mode

	skippedMCP []skippedServer // project MCP servers not used

	errs    []string
	uses    map[string]orchestrator.ToolUse // every call of the turn, by id
	denials []obj
	running map[string]*runningCall
	partial map[string]string // verbose: output after the last newline, by call
	nested  map[string]bool   // calls of subagents, shown indented
}

// runningCall is what the status line knows of a call.
type runningCall struct {
	label    string
	elapsed  time.Duration
	lines    uint64
	lastLine string
}

func newPrinter(format string, w io.Writer, sess *orchestrator.Session) *printer {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &printer{format: format, w: w, enc: enc, sess: sess,
		uses: map[string]orchestrator.ToolUse{}, running: map[string]*runningCall{}, partial: map[string]string{}, nested: map[string]bool{}}
}

type obj = map[string]any

func (p *printer) emit(v any) {
	if p.format == "stream-json" {
		_ = p.enc.Encode(v)
	}
}

// announce emits the stream's first event: what the session runs with.
func (p *printer) announce() {
	names := []string{}
	for _, t := range p.sess.Tools() {
		names = append(names, t.Name)
	}
	cfg := p.sess.Config()
	servers := []obj{}
	for _, st := range p.sess.MCPServers() {
		o := obj{"name": st.Name, "status": strings.ToLower(st.State.String())}
		if st.Error != "" {
			o["error"] = st.Error
		}
		servers = append(servers, o)
	}
	for _, sk := range p.skippedMCP {
		servers = append(servers, obj{"name": sk.name, "status": sk.status, "error": sk.reason})
	}
	init := obj{
		"type": "system", "subtype": "init", "session_id": p.sess.ID(), "cwd": p.sess.Workspace(),
		"model": p.sess.Info().Model, "tools": names, "mcp_servers": servers,
		"permissionMode": modeName(cfg.Settings), "version": version,
	}
	if sb, ok := p.sess.Sandbox(); ok {
		init["sandbox"] = sandboxObj(sb)
	}
	p.emit(init)
}

// follow reads the session's events until the turn completes.
func (p *printer) follow(ctx context.Context, sub *orchestrator.Subscription) {
	defer p.status.clear()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return
		}
		switch ev.Kind {
		case orchestrator.EventMessage:
			p.message(ev)
		case orchestrator.EventToolUse:
			p.uses[ev.ToolUse.ID] = *ev.ToolUse
			if ev.ParentToolUseID != "" {
				p.nested[ev.ToolUse.ID] = true
			}
			p.say("%s⏺ %s\n", p.indent(ev.ToolUse.ID), callLabel(ev.ToolUse.Name, ev.ToolUse.InputJSON))
		case orchestrator.EventToolStarted:
			if u, ok := p.uses[ev.Started.ToolUseID]; ok {
				p.running[u.ID] = &runningCall{label: callLabel(u.Name, u.InputJSON)}
				p.showStatus(u.ID)
			}
		case orchestrator.EventProgress:
			p.progress(ev.Progress)
		case orchestrator.EventToolResult:
			p.result(ev.Result)
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
				"task_id": n.TaskID, "tool_use_id": n.ToolUseID, "status": n.Status,
				"output_file": n.OutputPath, "summary": n.Summary,
			})
		case orchestrator.EventTasks:
			p.emit(obj{"type": "system", "subtype": "tasks", "session_id": p.sess.ID(), "tasks": ev.Tasks})
		case orchestrator.EventTurnComplete:
			return
		}
	}
}

func (p *printer) message(ev orchestrator.Event) {
	m := ev.Message
	// A subagent's messages name the Agent call that runs it.
	var parent any
	if ev.ParentToolUseID != "" {
		parent = ev.ParentToolUseID
	}
	switch m.Role {
	case model.RoleAssistant:
		p.emit(obj{"type": "assistant", "session_id": p.sess.ID(), "parent_tool_use_id": parent, "message": obj{
			"id": ev.MessageID, "type": "message", "role": "assistant", "content": m.Content,
		}})
		if t := strings.TrimSpace(m.Text()); t != "" && len(m.ToolUses()) > 0 {
			// Text on the way to the answer; the answer itself goes to stdout.
			p.say("%s\n", t)
		}
	case model.RoleUser:
		for _, b := range m.Content {
			// Tool results, and a subagent's prompt: the user's own
			// message is the prompt of the run.
			if b.Type == model.BlockToolResult || parent != nil {
				p.emit(obj{"type": "user", "session_id": p.sess.ID(), "parent_tool_use_id": parent, "message": obj{"role": "user", "content": m.Content}})
				return
			}
		}
	}
}

// progress shows new output of a running call.
func (p *printer) progress(pr *execapi.Progress) {
	id := pr.ToolUseID
	if p.verbose != nil && len(pr.Output) > 0 {
		text := p.partial[id] + string(pr.Output)
		lines := strings.Split(text, "\n")
		p.partial[id] = lines[len(lines)-1]
		for _, l := range lines[:len(lines)-1] {
			p.say("%s  │ %s\n", p.indent(id), strings.TrimRight(l, "\r"))
		}
	}
	if rc := p.running[id]; rc != nil {
		rc.elapsed, rc.lines = pr.Elapsed, pr.TotalLines
		if last := lastLine(pr.Output); last != "" {
			rc.lastLine = last
		}
		p.showStatus(id)
	}
}

// result notes a call's end: a denial for the json result, the end of its
// output with --verbose.
func (p *printer) result(r *execapi.CallResult) {
	id := r.ToolUseID
	delete(p.running, id)
	if len(p.running) == 0 {
		p.status.clear()
	}
	if rest := p.partial[id]; rest != "" {
		p.say("%s  │ %s\n", p.indent(id), rest)
	}
	delete(p.partial, id)
	summary := "done"
	if r.IsError {
		summary = "error: " + oneLine(firstLine(r.TextContent()), 200)
	}
	p.say("%s  ⎿ %s\n", p.indent(id), summary)
	if r.FinalOutcome() == tool.OutcomeDenied {
		u := p.uses[id]
		var input any = obj{}
		if json.Valid([]byte(u.InputJSON)) {
			input = json.RawMessage(u.InputJSON)
		}
		p.denials = append(p.denials, obj{"tool_name": u.Name, "tool_use_id": id, "tool_input": input})
	}
}

// indent returns the indentation of call id's lines: a subagent's calls
// are shown under the Agent call that runs them.
func (p *printer) indent(id string) string {
	if p.nested[id] {
		return "    "
	}
	return ""
}

// say writes a --verbose line on stderr.
func (p *printer) say(format string, a ...any) {
	if p.verbose != nil {
		fmt.Fprintf(p.verbose, format, a...)
	}
}

// showStatus rewrites the status line for call id.
func (p *printer) showStatus(id string) {
	rc := p.running[id]
	if p.status == nil || rc == nil {
		return
	}
	var b strings.Builder
	b.WriteString("⏺ ")
	if n := len(p.running); n > 1 {
		fmt.Fprintf(&b, "%d calls running · ", n)
	}
	b.WriteString(rc.label)
	fmt.Fprintf(&b, " · %s", rc.elapsed.Truncate(time.Second))
	if rc.lines > 0 {
		fmt.Fprintf(&b, " · %d lines", rc.lines)
	}
	if rc.lastLine != "" {
		b.WriteString(" · " + rc.lastLine)
	}
	p.status.show(b.String())
}

// finish writes the outcome of the turn. signaled says the run was
// stopped by a signal: text mode then prints no answer.
func (p *printer) finish(res *orchestrator.TurnResult, signaled bool) error {
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
		case signaled:
		case !isErr:
			_, err = fmt.Fprintln(p.w, res.Text)
		case errText != "":
			_, err = fmt.Fprintf(p.w, "Error: %s\n", errText)
		default:
			_, err = fmt.Fprintf(p.w, "Error: the turn ended: %s\n", res.StopReason)
		}
		return err
	}
	denials := p.denials
	if denials == nil {
		denials = []obj{}
	}
	out := obj{
		"type": "result", "subtype": subtype, "is_error": isErr, "result": res.Text,
		"session_id": p.sess.ID(), "num_turns": res.Requests, "duration_ms": res.Duration.Milliseconds(),
		"duration_api_ms": res.APIDuration.Milliseconds(), "stop_reason": string(res.StopReason),
		"usage": res.Usage, "permission_denials": denials,
	}
	if errText != "" {
		out["error"] = errText
	}
	if len(p.errs) > 0 {
		out["errors"] = p.errs
	}
	return p.enc.Encode(out)
}

// callLabel renders a call on one line: its tool and main argument.
func callLabel(name, inputJSON string) string {
	var in map[string]any
	_ = json.Unmarshal([]byte(inputJSON), &in)
	arg := ""
	for _, k := range []string{"command", "file_path", "notebook_path", "pattern", "path", "task_id", "bash_id", "shell_id", "subject", "description", "taskId"} {
		if v, ok := in[k].(string); ok && v != "" {
			arg = v
			break
		}
	}
	if arg == "" && len(in) > 0 {
		arg = inputJSON
	}
	return fmt.Sprintf("%s(%s)", name, oneLine(arg, 80))
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "<tool_use_error>")
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "</tool_use_error>")
}

// lastLine returns the last non-empty line of out, cleaned for one line of
// a terminal.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\r\n"), "\n")
	l := lines[len(lines)-1]
	if i := strings.LastIndexByte(l, '\r'); i >= 0 {
		l = l[i+1:]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == utf8.RuneError {
			return -1 // escapes and control characters would upset the line
		}
		return r
	}, oneLine(l, 200))
}

// statusLine is one line on a terminal, rewritten in place. A nil
// statusLine does nothing.
type statusLine struct {
	w     *os.File
	shown bool
}

// newStatusLine returns a status line on f when f is a terminal, else nil.
func newStatusLine(f io.Writer) *statusLine {
	if ff, ok := f.(*os.File); ok && isTerminal(ff) {
		return &statusLine{w: ff}
	}
	return nil
}

func (s *statusLine) show(text string) {
	if s == nil {
		return
	}
	width := 80
	if ws, err := unix.IoctlGetWinsize(int(s.w.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		width = max(int(ws.Col), 20)
	}
	if r := []rune(text); len(r) > width-1 {
		text = string(r[:width-2]) + "…"
	}
	fmt.Fprintf(s.w, "\r\x1b[K%s", text)
	s.shown = true
}

func (s *statusLine) clear() {
	if s == nil || !s.shown {
		return
	}
	fmt.Fprint(s.w, "\r\x1b[K")
	s.shown = false
}

// sandboxObj is the executor's sandbox as the init event shows it: what
// confines the tools.
func sandboxObj(sb execapi.SandboxInfo) obj {
	o := obj{"backend": sb.Backend, "enforced": append([]string{}, sb.Enforced...), "network": sb.Network}
	if sb.RunAs != "" {
		o["run_as"] = sb.RunAs
	}
	if len(sb.AllowedDomains) > 0 {
		o["allowed_domains"] = sb.AllowedDomains
	}
	return o
}
