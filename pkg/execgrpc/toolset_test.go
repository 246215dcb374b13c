package execgrpc_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
)

// openTools opens a session that offers only the named tools, with a
// PreToolUse hook on every tool that leaves a file named after the call,
// and an ask rule for Write.
func (h *harness) openTools(tools *executorv1.ToolSet) *stream {
	h.t.Helper()
	set := settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeBypass, Ask: []string{"Write"}},
		Hooks: map[settings.Event][]settings.HookMatcher{settings.PreToolUse: {{
			Matcher: "*", Hooks: []settings.HookCommand{{Command: `touch "hook-$(sed -n 's/.*"tool_use_id":"\([^"]*\)".*/\1/p')"`}},
		}}},
	}
	if err := set.Validate(); err != nil {
		h.t.Fatal(err)
	}
	return h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		Settings: settingspb.ToProto(set), Tools: tools}}})
}

const outcomeUnknown = executorv1.Outcome_OUTCOME_UNKNOWN_TOOL

func TestToolNotOfferedIsNotRun(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	s := h.openTools(&executorv1.ToolSet{Names: []string{"Read", "BashOutput"}})
	if got, want := s.hello.GetTools(), []string{"Read", "TaskOutput"}; !slices.Equal(got, want) {
		t.Errorf("hello tools %v, want %v", got, want)
	}
	notEnabled := func(name string) string {
		return "<tool_use_error>Error: No such tool available: " + name + ". " + name +
			" exists but is not enabled in this context. Use one of the available tools instead.</tool_use_error>"
	}
	unknown := outcomeUnknown
	check := func(s *stream, id, name, input string, outcome executorv1.Outcome, txt string) {
		t.Helper()
		s.useTool(id, "m-"+id, name, input)
		evs := s.until(func(ev *executorv1.ExecuteResponse) bool {
			return ev.GetResult() != nil || ev.GetPermissionRequest() != nil
		})
		for _, ev := range evs {
			if outcome == unknown && (ev.GetStarted() != nil || ev.GetPermissionRequest() != nil) {
				t.Fatalf("%s: %v before its result: a call of a tool not offered left the queue", id, ev)
			}
		}
		wantResult(t, evs[len(evs)-1].GetResult(), outcome, true, txt, "")
	}

	check(s, "w", "Write", `{"file_path":"w.txt","content":"x"}`, unknown, notEnabled("Write"))
	check(s, "k", "KillShell", `{"shell_id":"b12345678"}`, unknown, notEnabled("KillShell"))
	check(s, "x", "NoSuchTool", `{}`, unknown, "<tool_use_error>Error: No such tool available: NoSuchTool</tool_use_error>")
	// TaskOutput is offered under its older name, and so under its own.
	check(s, "o", "TaskOutput", `{"task_id":"b12345678"}`, executorv1.Outcome_OUTCOME_INVALID_INPUT,
		"<tool_use_error>No task found with ID: b12345678</tool_use_error>")
	writeFile(t, filepath.Join(root, "a.txt"), "alpha\n")
	s.useTool("r", "m-r", "Read", `{"file_path":"a.txt"}`)
	if r := s.resultWithoutAsking(); r.GetIsError() {
		t.Fatalf("Read, which is offered: %q", text(r))
	}
	if !pathExists(filepath.Join(root, "hook-r")) {
		t.Fatal("the PreToolUse hook did not run for Read: the test cannot tell whether it runs for other calls")
	}
	for _, id := range []string{"w", "k", "x"} {
		if pathExists(filepath.Join(root, "hook-"+id)) {
			t.Errorf("the PreToolUse hook ran for %s, a call of a tool not offered", id)
		}
	}
	if pathExists(filepath.Join(root, "w.txt")) {
		t.Fatal("Write ran although the session does not offer it")
	}

	// A resumed session keeps its set.
	id := s.hello.GetSessionId()
	s.cancel()
	<-s.errc
	r := h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{SessionId: id, LastSequence: s.hello.GetLastSequence()}}})
	if got := r.hello.GetTools(); !slices.Equal(got, []string{"Read", "TaskOutput"}) {
		t.Errorf("hello tools after resume %v", got)
	}
	check(r, "w2", "Write", `{"file_path":"w.txt","content":"x"}`, unknown, notEnabled("Write"))
}

func TestToolSetEmptyOffersNoneUnsetOffersAll(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	writeFile(t, filepath.Join(root, "a.txt"), "alpha\n")
	none := h.openTools(&executorv1.ToolSet{})
	if got := none.hello.GetTools(); len(got) != 0 {
		t.Errorf("hello tools of an empty set: %v", got)
	}
	none.useTool("r", "m", "Read", `{"file_path":"a.txt"}`)
	if r := none.resultWithoutAsking(); r.GetOutcome() != outcomeUnknown {
		t.Errorf("Read in a session that offers no tool: %v %q", r.GetOutcome(), text(r))
	}

	all := h.openTools(nil)
	list, err := h.client.ListTools(context.Background(), &executorv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list.GetTools() {
		names = append(names, d.GetName())
		if d.GetName() == "TaskOutput" && !slices.Equal(d.GetAliases(), []string{"BashOutput"}) {
			t.Errorf("TaskOutput's aliases: %v", d.GetAliases())
		}
		if d.GetName() == "TaskStop" && !slices.Equal(d.GetAliases(), []string{"KillBash", "KillShell"}) {
			t.Errorf("TaskStop's aliases: %v", d.GetAliases())
		}
	}
	if got := all.hello.GetTools(); !slices.Equal(got, names) {
		t.Errorf("hello tools without a set %v, want every tool %v", got, names)
	}
	all.useTool("r", "m", "Read", `{"file_path":"a.txt"}`)
	if r := all.resultWithoutAsking(); r.GetIsError() {
		t.Errorf("Read: %q", text(r))
	}
}

func TestToolSetWithAnUnknownNameIsRefused(t *testing.T) {
	h, _ := realHarness(t)
	st, err := h.client.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		Tools: &executorv1.ToolSet{Names: []string{"Read", "Raed"}}}}})
	_, err = st.Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"Raed"`) {
		t.Fatalf("open with an unknown tool name: %v, want InvalidArgument naming it", err)
	}
}
