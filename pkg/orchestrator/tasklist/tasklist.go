// Package tasklist is a conversation's task list: the state behind Claude
// Code's TaskCreate, TaskGet, TaskList and TaskUpdate tools, their input
// schemas and the results the model reads.
//
// The list is conversation state, not work on a machine: the orchestrator
// runs these tools itself and keeps the list with the transcript. The
// package knows nothing of sessions, executors or persistence beyond
// encoding the list (State).
package tasklist

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Tool names.
const (
	Create = "TaskCreate"
	Get    = "TaskGet"
	List   = "TaskList"
	Update = "TaskUpdate"
)

// Statuses of a task. A task updated to StatusDeleted leaves the list.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusDeleted    = "deleted"
)

// Task is one entry of the list.
type Task struct {
	ID          string          `json:"id"`
	Subject     string          `json:"subject"`
	Description string          `json:"description"`
	ActiveForm  string          `json:"activeForm,omitempty"`
	Status      string          `json:"status"`
	Owner       string          `json:"owner,omitempty"`
	Blocks      []string        `json:"blocks,omitempty"`
	BlockedBy   []string        `json:"blockedBy,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// State is the list as it is persisted: the tasks and the number the next
// task gets (ids of deleted tasks are not given again).
type State struct {
	Next  int    `json:"next"`
	Tasks []Task `json:"tasks"`
}

// Tasks is a task list, safe for concurrent use (a conversation and its
// subagents share one).
type Tasks struct {
	mu    sync.Mutex // guards the fields below
	next  int
	tasks []Task // in order of creation
}

// New returns an empty list.
func New() *Tasks { return &Tasks{next: 1} }

// Restore returns a list holding st.
func Restore(st State) *Tasks {
	t := &Tasks{next: max(st.Next, 1), tasks: slices.Clone(st.Tasks)}
	return t
}

// State returns a copy of the list.
func (t *Tasks) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return State{Next: t.next, Tasks: cloneTasks(t.tasks)}
}

func cloneTasks(ts []Task) []Task {
	out := make([]Task, len(ts))
	for i, x := range ts {
		x.Blocks, x.BlockedBy = slices.Clone(x.Blocks), slices.Clone(x.BlockedBy)
		out[i] = x
	}
	return out
}

// IsTool reports whether name is one of the task list tools.
func IsTool(name string) bool {
	switch name {
	case Create, Get, List, Update:
		return true
	}
	return false
}

// Specs returns the specs of the four tools, sorted by name.
func Specs() []tool.Spec {
	return []tool.Spec{
		{Name: Create, Description: descCreate, InputSchema: json.RawMessage(schemaCreate)},
		{Name: Get, Description: descGet, InputSchema: json.RawMessage(schemaGet), ReadOnly: true, Concurrency: tool.ConcurrencyAlways},
		{Name: List, Description: descList, InputSchema: json.RawMessage(schemaList), ReadOnly: true, Concurrency: tool.ConcurrencyAlways},
		{Name: Update, Description: descUpdate, InputSchema: json.RawMessage(schemaUpdate)},
	}
}

const (
	descCreate = "Create a task in this conversation's task list, to plan and track multi-step work. " +
		"Give a short imperative subject, a description of what done means, and optionally activeForm, " +
		"the present continuous form shown while the task is in progress. New tasks are pending."
	descGet = "Get one task of the task list by its id: subject, status, description and the tasks " +
		"it blocks or is blocked by."
	descList   = "List the tasks of the task list with their id, status, owner and open blockers."
	descUpdate = "Update a task of the task list: its status (pending, in_progress, completed, or " +
		"deleted to remove it), subject, description, activeForm, owner or metadata, and the tasks it " +
		"blocks (addBlocks) or is blocked by (addBlockedBy). Mark a task in_progress before you start " +
		"it and completed as soon as it is done."

	schemaCreate = `{"type":"object","properties":{"subject":{"type":"string"},"description":{"type":"string"},` +
		`"activeForm":{"type":"string"},"metadata":{"type":"object","additionalProperties":{}}},` +
		`"required":["subject","description"],"additionalProperties":false}`
	schemaGet    = `{"type":"object","properties":{"taskId":{"type":"string"}},"required":["taskId"],"additionalProperties":false}`
	schemaList   = `{"type":"object","properties":{},"additionalProperties":false}`
	schemaUpdate = `{"type":"object","properties":{"taskId":{"type":"string"},"subject":{"type":"string"},` +
		`"description":{"type":"string"},"activeForm":{"type":"string"},` +
		`"status":{"type":"string","enum":["pending","in_progress","completed","deleted"]},` +
		`"addBlocks":{"type":"array","items":{"type":"string"}},"addBlockedBy":{"type":"array","items":{"type":"string"}},` +
		`"owner":{"type":"string"},"metadata":{"type":"object","additionalProperties":{}}},` +
		`"required":["taskId"],"additionalProperties":false}`
)

// Call runs the task list tool name with the model's input text. changed
// reports whether the list changed (and must be persisted).
func (t *Tasks) Call(name, input string) (res *tool.Result, changed bool) {
	var sch string
	switch name {
	case Create:
		sch = schemaCreate
	case Get:
		sch = schemaGet
	case List:
		sch = schemaList
	case Update:
		sch = schemaUpdate
	default:
		return tool.UseError(tool.OutcomeUnknownTool, schema.UnknownTool(name)), false
	}
	in, err := schema.Validate(name, json.RawMessage(sch), input)
	if err != nil {
		return tool.ValidationResult(err), false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch name {
	case Create:
		return t.create(in)
	case Get:
		return t.get(in), false
	case List:
		return t.list(), false
	}
	return t.update(in)
}

func (t *Tasks) create(in json.RawMessage) (*tool.Result, bool) {
	var a struct {
		Subject, Description, ActiveForm string
		Metadata                         json.RawMessage
	}
	if err := json.Unmarshal(in, &a); err != nil {
		return tool.UseError(tool.OutcomeInvalidInput, err.Error()), false
	}
	id := strconv.Itoa(t.next)
	t.next++
	t.tasks = append(t.tasks, Task{ID: id, Subject: a.Subject, Description: a.Description,
		ActiveForm: a.ActiveForm, Status: StatusPending, Metadata: a.Metadata})
	return tool.Text(fmt.Sprintf("Task #%s created successfully: %s", id, a.Subject)), true
}

// find returns the index of task id, or -1. A leading # is allowed.
func (t *Tasks) find(id string) int {
	id = strings.TrimPrefix(strings.TrimSpace(id), "#")
	return slices.IndexFunc(t.tasks, func(x Task) bool { return x.ID == id })
}

func (t *Tasks) get(in json.RawMessage) *tool.Result {
	var a struct{ TaskID string }
	_ = json.Unmarshal(in, &a)
	i := t.find(a.TaskID)
	if i < 0 {
		return tool.Text("Task not found")
	}
	x := t.tasks[i]
	var b strings.Builder
	fmt.Fprintf(&b, "Task #%s: %s\nStatus: %s\nDescription: %s", x.ID, x.Subject, x.Status, x.Description)
	if x.Owner != "" {
		fmt.Fprintf(&b, "\nOwner: %s", x.Owner)
	}
	if len(x.BlockedBy) > 0 {
		fmt.Fprintf(&b, "\nBlocked by: %s", refs(x.BlockedBy))
	}
	if len(x.Blocks) > 0 {
		fmt.Fprintf(&b, "\nBlocks: %s", refs(x.Blocks))
	}
	return tool.Text(b.String())
}

func (t *Tasks) list() *tool.Result {
	if len(t.tasks) == 0 {
		return tool.Text("No tasks found")
	}
	lines := make([]string, 0, len(t.tasks))
	for _, x := range t.tasks {
		line := fmt.Sprintf("#%s [%s] %s", x.ID, x.Status, x.Subject)
		if x.Owner != "" {
			line += " (" + x.Owner + ")"
		}
		// Only blockers still open hold a task up.
		var open []string
		for _, b := range x.BlockedBy {
			if j := t.find(b); j >= 0 && t.tasks[j].Status != StatusCompleted {
				open = append(open, b)
			}
		}
		if len(open) > 0 {
			line += " [blocked by " + refs(open) + "]"
		}
		lines = append(lines, line)
	}
	return tool.Text(strings.Join(lines, "\n"))
}

func (t *Tasks) update(in json.RawMessage) (*tool.Result, bool) {
	var a struct {
		TaskID                                  string
		Subject, Description, ActiveForm, Owner *string
		Status                                  *string
		AddBlocks, AddBlockedBy                 []string
		Metadata                                json.RawMessage
	}
	if err := json.Unmarshal(in, &a); err != nil {
		return tool.UseError(tool.OutcomeInvalidInput, err.Error()), false
	}
	i := t.find(a.TaskID)
	if i < 0 {
		return tool.UseError(tool.OutcomeToolError, fmt.Sprintf("Task #%s not found", strings.TrimPrefix(a.TaskID, "#"))), false
	}
	id := t.tasks[i].ID
	for _, other := range slices.Concat(a.AddBlocks, a.AddBlockedBy) {
		if j := t.find(other); j < 0 || t.tasks[j].ID == id {
			return tool.UseError(tool.OutcomeInvalidInput, fmt.Sprintf("Task #%s cannot block or wait for task #%s: no such other task", id, strings.TrimPrefix(other, "#"))), false
		}
	}
	if a.Status != nil && *a.Status == StatusDeleted {
		t.tasks = slices.Delete(t.tasks, i, i+1)
		for k := range t.tasks {
			t.tasks[k].Blocks = slices.DeleteFunc(t.tasks[k].Blocks, func(s string) bool { return s == id })
			t.tasks[k].BlockedBy = slices.DeleteFunc(t.tasks[k].BlockedBy, func(s string) bool { return s == id })
		}
		return tool.Text(fmt.Sprintf("Updated task #%s deleted", id)), true
	}
	x := &t.tasks[i]
	var fields []string
	set := func(name string, dst *string, v *string) {
		if v != nil && *v != *dst {
			*dst = *v
			fields = append(fields, name)
		}
	}
	set("subject", &x.Subject, a.Subject)
	set("description", &x.Description, a.Description)
	set("activeForm", &x.ActiveForm, a.ActiveForm)
	set("owner", &x.Owner, a.Owner)
	set("status", &x.Status, a.Status)
	if a.Metadata != nil {
		x.Metadata = a.Metadata
		fields = append(fields, "metadata")
	}
	link := func(blocker, blocked string) bool {
		b, w := &t.tasks[t.find(blocker)], &t.tasks[t.find(blocked)]
		if slices.Contains(b.Blocks, w.ID) {
			return false
		}
		b.Blocks = append(b.Blocks, w.ID)
		w.BlockedBy = append(w.BlockedBy, b.ID)
		return true
	}
	added := false
	for _, o := range a.AddBlocks {
		added = link(id, o) || added
	}
	if added {
		fields = append(fields, "blocks")
	}
	added = false
	for _, o := range a.AddBlockedBy {
		added = link(o, id) || added
	}
	if added {
		fields = append(fields, "blockedBy")
	}
	if len(fields) == 0 {
		return tool.Text(fmt.Sprintf("Task #%s unchanged", id)), false
	}
	return tool.Text(fmt.Sprintf("Updated task #%s %s", id, strings.Join(fields, ", "))), true
}

// refs renders ids as "#1, #2".
func refs(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "#" + id
	}
	return strings.Join(out, ", ")
}
