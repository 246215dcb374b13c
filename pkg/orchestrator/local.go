package orchestrator

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
	"github.com/toolwire/toolwire/pkg/orchestrator/tasklist"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// The tools the orchestrator runs itself, because they work on the
// conversation rather than on a machine: the task list (TaskCreate,
// TaskGet, TaskList, TaskUpdate) and Agent, which runs a subagent. They
// are offered with the executor's tools, under the same --tools and
// allowed/disallowed lists, and a call of one is never sent to the
// executor: it gets its one result here.

// LocalTools returns the tools the orchestrator runs itself, in the shape
// of an executor's list, with the Agent tool describing the built-in
// agent types and user: a client checks tool names against them as
// against the executor's.
func LocalTools(user []agents.Definition) []execapi.ToolInfo {
	return localTools(agents.NewSet(user))
}

func localTools(set *agents.Set) []execapi.ToolInfo {
	var out []execapi.ToolInfo
	for _, sp := range tasklist.Specs() {
		out = append(out, execapi.ToolInfo{Spec: sp})
	}
	return append(out, execapi.ToolInfo{
		Spec: tool.Spec{Name: agents.ToolName, Description: set.Description(),
			InputSchema: json.RawMessage(agents.InputSchema), Concurrency: tool.ConcurrencyAlways},
		Aliases: []string{agents.TaskAlias},
	})
}

// deniedLocal returns the local tools a deny rule of the session's
// settings names whole ("Agent", not "Agent(x)"): the executor, which
// applies the rules to its own tools, never sees their calls, so they are
// not offered at all, as Claude Code leaves out a tool denied whole.
func (s *Session) deniedLocal() []string {
	if s.cfg.Settings == nil {
		return nil
	}
	var out []string
	for _, text := range s.cfg.Settings.Permissions.Deny {
		if r, err := permission.ParseRule(text); err == nil && r.Specifier == "" && isLocal(r.Tool) {
			out = append(out, canonicalLocal(r.Tool))
		}
	}
	return out
}

// isLocal reports whether the orchestrator runs the tool name itself.
func isLocal(name string) bool {
	return tasklist.IsTool(name) || name == agents.ToolName || name == agents.TaskAlias
}

// offers reports whether tools holds the tool a call names (by its older
// name too).
func offers(tools []model.Tool, name string) bool {
	if name == agents.TaskAlias {
		name = agents.ToolName
	}
	return slices.ContainsFunc(tools, func(t model.Tool) bool { return t.Name == name })
}

// localCall is a call of a local tool: where its result goes and what it
// may use.
type localCall struct {
	use      execapi.ToolUse
	cs       *callSet
	announce func(*execapi.CallResult) // tells clients the result
	tools    []model.Tool              // offered to the caller
	link     execapi.Link              // the caller's executor session
	parent   string                    // the caller's Agent call, for a subagent
}

// deliver gives the call its result.
func (c *localCall) deliver(r *tool.Result) {
	c.cs.deliver(&execapi.CallResult{ToolUseID: c.use.ID, ToolName: canonicalLocal(c.use.Name), Result: r}, c.announce)
}

func canonicalLocal(name string) string {
	if name == agents.TaskAlias {
		return agents.ToolName
	}
	return name
}

// runLocal runs c if its tool is a local one and reports whether it was.
// A task list call runs at once; an Agent call runs its subagent in the
// background, tied to ctx (the call's: an interrupt stops it) and counted
// among the session's running turns, so closing the session waits for it.
func (s *Session) runLocal(ctx context.Context, c *localCall) bool {
	name := c.use.Name
	if !isLocal(name) {
		return false
	}
	switch {
	case !offers(c.tools, name):
		c.deliver(tool.UseError(tool.OutcomeUnknownTool, schema.ToolNotEnabled(name)))
	case tasklist.IsTool(name):
		res, changed := s.tasks.Call(name, c.use.Input)
		if changed {
			s.saveTasks()
		}
		c.deliver(res)
	default:
		s.turns.Add(1)
		go func() {
			defer s.turns.Done()
			res, cleanup := s.runAgent(ctx, c)
			c.deliver(res)
			cleanup() // after the result: closing an executor session may take a while
		}()
	}
	return true
}

// saveTasks records the task list in the transcript and tells clients.
func (s *Session) saveTasks() {
	st := s.tasks.State()
	s.publish(Event{Kind: EventTasks, Tasks: st.Tasks})
	store := s.o.cfg.Store
	if store == nil || s.fenced.Load() {
		return
	}
	raw, err := json.Marshal(st)
	if err == nil {
		err = store.Append(context.WithoutCancel(s.ctx), s.id, transcript.Record{Kind: transcript.KindTasks, Time: time.Now(), Tasks: raw})
	}
	if err != nil {
		s.publishError("persistence", err, true)
	}
}

// restoreTasks returns the task list a transcript holds.
func restoreTasks(raw json.RawMessage) (*tasklist.Tasks, error) {
	if len(raw) == 0 {
		return tasklist.New(), nil
	}
	var st tasklist.State
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	return tasklist.Restore(st), nil
}

// Tasks returns the conversation's task list.
func (s *Session) Tasks() []tasklist.Task { return s.tasks.State().Tasks }
