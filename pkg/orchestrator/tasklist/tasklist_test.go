package tasklist_test

import (
	"encoding/json"
	"testing"

	"github.com/toolwire/toolwire/pkg/orchestrator/tasklist"
)

func call(t *testing.T, l *tasklist.Tasks, name, input string) (string, bool) {
	t.Helper()
	r, _ := l.Call(name, input)
	return r.TextContent(), r.IsError
}

func TestTaskList(t *testing.T) {
	l := tasklist.New()
	steps := []struct {
		name, input, want string
		isErr             bool
	}{
		{tasklist.List, `{}`, "No tasks found", false},
		{tasklist.Create, `{"subject":"Write the parser","description":"parse it","activeForm":"Writing the parser"}`, "Task #1 created successfully: Write the parser", false},
		{tasklist.Create, `{"subject":"Test it","description":"tests pass"}`, "Task #2 created successfully: Test it", false},
		{tasklist.Update, `{"taskId":"2","addBlockedBy":["1"]}`, "Updated task #2 blockedBy", false},
		{tasklist.Update, `{"taskId":"1","status":"in_progress","owner":"me"}`, "Updated task #1 owner, status", false},
		{tasklist.List, `{}`, "#1 [in_progress] Write the parser (me)\n#2 [pending] Test it [blocked by #1]", false},
		{tasklist.Get, `{"taskId":"2"}`, "Task #2: Test it\nStatus: pending\nDescription: tests pass\nBlocked by: #1", false},
		{tasklist.Update, `{"taskId":"1","status":"completed"}`, "Updated task #1 status", false},
		{tasklist.List, `{}`, "#1 [completed] Write the parser (me)\n#2 [pending] Test it", false},
		{tasklist.Update, `{"taskId":"1","status":"deleted"}`, "Updated task #1 deleted", false},
		{tasklist.Get, `{"taskId":"2"}`, "Task #2: Test it\nStatus: pending\nDescription: tests pass", false},
		{tasklist.Get, `{"taskId":"1"}`, "Task not found", false},
		{tasklist.Update, `{"taskId":"9","status":"completed"}`, "<tool_use_error>Task #9 not found</tool_use_error>", true},
		{tasklist.Update, `{"taskId":"2","status":"done"}`, "", true},
		{tasklist.Create, `{"subject":"no description"}`, "", true},
		{tasklist.Create, `{"subject":"Third","description":"d"}`, "Task #3 created successfully: Third", false},
	}
	for i, s := range steps {
		got, isErr := call(t, l, s.name, s.input)
		if isErr != s.isErr || (s.want != "" && got != s.want) {
			t.Fatalf("step %d %s %s: got %q (error %v), want %q (error %v)", i, s.name, s.input, got, isErr, s.want, s.isErr)
		}
	}
	// The list survives its encoding, ids included.
	raw, err := json.Marshal(l.State())
	if err != nil {
		t.Fatal(err)
	}
	var st tasklist.State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	back := tasklist.Restore(st)
	if got, _ := call(t, back, tasklist.List, `{}`); got != "#2 [pending] Test it\n#3 [pending] Third" {
		t.Fatalf("restored list: %q", got)
	}
	if got, _ := call(t, back, tasklist.Create, `{"subject":"Fourth","description":"d"}`); got != "Task #4 created successfully: Fourth" {
		t.Fatalf("after restore: %q", got)
	}
}
