package execgrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
)

// These tests drive the permission and hook step of the pipeline through
// the real Execute stream, with the real tools and the sandbox: the rules
// and hooks a session sends in Open, the operator's from execsvc.Config.

// permHarness is realHarness with the operator's settings, the permission
// timeout and the logger taken from cfg (Root is always a fresh sandbox
// directory).
func permHarness(t *testing.T, cfg execsvc.Config) (*harness, string) {
	t.Helper()
	cfg.Root = sandboxtest.Dir(t)
	ex, err := execsvc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rpcserver.New(nil)
	executorv1.RegisterExecutorServiceServer(srv.Server, execgrpc.NewServer(ex, nil))
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ex.Close()
		_ = conn.Close()
		srv.Stop()
		if left := sandboxtest.Descendants(); len(left) > 0 {
			t.Errorf("processes left behind: %v", left)
		}
	})
	return &harness{t: t, ex: ex, client: executorv1.NewExecutorServiceClient(conn)}, cfg.Root
}

// openWith opens a session with the given settings.
func (h *harness) openWith(set settings.Settings) *stream {
	h.t.Helper()
	if err := set.Validate(); err != nil {
		h.t.Fatalf("test settings are invalid: %v", err)
	}
	return h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		Settings: settingspb.ToProto(set)}}})
}

// decide answers the permission request of call id.
func (s *stream) decide(id string, b executorv1.PermissionBehavior, msg string) {
	s.t.Helper()
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_PermissionDecision{
		PermissionDecision: &executorv1.PermissionDecision{ToolUseId: id, Behavior: b, Message: msg}}})
}

// awaitRequest returns the next permission request, failing if a Result
// comes first.
func (s *stream) awaitRequest() *executorv1.PermissionRequest {
	s.t.Helper()
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool {
		return ev.GetPermissionRequest() != nil || ev.GetResult() != nil
	})
	last := evs[len(evs)-1]
	if r := last.GetResult(); r != nil {
		s.t.Fatalf("result of %s (%v, decided by %q: %q) came where a permission request was expected",
			r.GetToolUseId(), r.GetOutcome(), r.GetDecidedBy(), text(r))
	}
	return last.GetPermissionRequest()
}

// resultWithoutAsking returns the next Result, failing if a permission
// request comes before it.
func (s *stream) resultWithoutAsking() *executorv1.Result {
	s.t.Helper()
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool {
		return ev.GetResult() != nil || ev.GetPermissionRequest() != nil
	})
	last := evs[len(evs)-1]
	if q := last.GetPermissionRequest(); q != nil {
		s.t.Fatalf("unexpected permission request for %s: %q", q.GetToolUseId(), q.GetReason())
	}
	return last.GetResult()
}

// wantRequest checks every field of a permission request.
func wantRequest(t *testing.T, got *executorv1.PermissionRequest, id, toolName, input, reason, rule string) {
	t.Helper()
	if got.GetToolUseId() != id || got.GetToolName() != toolName || got.GetReason() != reason || got.GetSuggestedRule() != rule {
		t.Errorf("permission request\n got id=%q tool=%q reason=%q rule=%q\nwant id=%q tool=%q reason=%q rule=%q",
			got.GetToolUseId(), got.GetToolName(), got.GetReason(), got.GetSuggestedRule(), id, toolName, reason, rule)
	}
	if !sameJSON(got.GetInputJson(), input) {
		t.Errorf("permission request input %s, want %s", got.GetInputJson(), input)
	}
}

// wantResult checks a Result's outcome, error flag, text and decider.
func wantResult(t *testing.T, r *executorv1.Result, outcome executorv1.Outcome, isError bool, txt, decidedBy string) {
	t.Helper()
	if r.GetOutcome() != outcome || r.GetIsError() != isError || text(r) != txt || r.GetDecidedBy() != decidedBy {
		t.Errorf("result of %s\n got outcome=%v is_error=%v decided_by=%q text=%q\nwant outcome=%v is_error=%v decided_by=%q text=%q",
			r.GetToolUseId(), r.GetOutcome(), r.GetIsError(), r.GetDecidedBy(), text(r), outcome, isError, decidedBy, txt)
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}

func pathExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func bashInput(cmd string) string { return `{"command":` + jsonString(cmd) + `}` }

func useErrorText(s string) string { return "<tool_use_error>" + s + "</tool_use_error>" }

const (
	allowOnce   = executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ONCE
	allowAlways = executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ALWAYS
	denyIt      = executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_DENY

	outcomeOK     = executorv1.Outcome_OUTCOME_SUCCESS
	outcomeDenied = executorv1.Outcome_OUTCOME_DENIED
)

const noOutput = "(Bash completed with no output)"

func TestAskAllowOnceAsksAgain(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	s := h.openWith(settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeDefault}})
	cmd := "touch once.txt"
	const reason = "Bash in default mode asks before running: touch once.txt"

	s.useTool("t1", "m1", "Bash", bashInput(cmd))
	wantRequest(t, s.awaitRequest(), "t1", "Bash", bashInput(cmd), reason, "Bash(touch:*)")
	if pathExists(filepath.Join(root, "once.txt")) {
		t.Fatal("the command ran before it was allowed")
	}
	s.decide("t1", allowOnce, "")
	wantResult(t, s.results(1)[0], outcomeOK, false, noOutput, "client")
	if !pathExists(filepath.Join(root, "once.txt")) {
		t.Fatal("allowed once, but once.txt was not created")
	}

	// Allow once adds no rule: the same call asks again.
	s.useTool("t2", "m2", "Bash", bashInput(cmd))
	wantRequest(t, s.awaitRequest(), "t2", "Bash", bashInput(cmd), reason, "Bash(touch:*)")
	s.decide("t2", denyIt, "")
	wantResult(t, s.results(1)[0], outcomeDenied, true,
		useErrorText("The user denied permission to use Bash."), "client")
}

func TestAskAllowAlwaysAddsTheSuggestedRule(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	s := h.openWith(settings.Settings{})

	s.useTool("t1", "m1", "Bash", bashInput("touch a.txt"))
	wantRequest(t, s.awaitRequest(), "t1", "Bash", bashInput("touch a.txt"),
		"Bash in default mode asks before running: touch a.txt", "Bash(touch:*)")
	s.decide("t1", allowAlways, "")
	wantResult(t, s.results(1)[0], outcomeOK, false, noOutput, "client")

	// The added rule covers the same call and others of the same prefix.
	for _, c := range []struct{ id, cmd, file string }{
		{"t2", "touch a.txt", "a.txt"},
		{"t3", "touch b.txt", "b.txt"},
	} {
		s.useTool(c.id, "m-"+c.id, "Bash", bashInput(c.cmd))
		wantResult(t, s.resultWithoutAsking(), outcomeOK, false, noOutput, "session:Bash(touch:*)")
		if !pathExists(filepath.Join(root, c.file)) {
			t.Errorf("%s: %s was not created", c.cmd, c.file)
		}
	}

	// The rule is a prefix rule of touch only: other commands still ask.
	s.useTool("t4", "m4", "Bash", bashInput("mkdir d"))
	wantRequest(t, s.awaitRequest(), "t4", "Bash", bashInput("mkdir d"),
		"Bash in default mode asks before running: mkdir d", "Bash(mkdir:*)")
	s.decide("t4", denyIt, "")
	s.results(1)
}

func TestAskDeniedWithMessageAndTheConversationGoesOn(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	s := h.openWith(settings.Settings{})
	target := filepath.Join(root, "plan.md")
	in := `{"file_path":` + jsonString(target) + `,"content":"step 1\n"}`

	s.useTool("w", "m1", "Write", in)
	wantRequest(t, s.awaitRequest(), "w", "Write", in,
		"Write in default mode asks before changing "+target, "Edit(/**)")
	s.decide("w", denyIt, "Write it under docs/ instead.")
	wantResult(t, s.results(1)[0], outcomeDenied, true,
		useErrorText("The user denied permission to use Write. Their message: Write it under docs/ instead."), "client")
	if pathExists(target) {
		t.Fatal("a denied Write created the file")
	}

	// Deny-and-continue: the session takes further calls.
	s.useTool("e", "m2", "Bash", bashInput("echo still here"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "still here", "mode:default")
}

func TestAskNotAnsweredIsDenied(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{PermissionTimeout: 300 * time.Millisecond})
	s := h.openWith(settings.Settings{})

	s.useTool("t1", "m1", "Bash", bashInput("touch late.txt"))
	s.awaitRequest() // and never answered
	wantResult(t, s.results(1)[0], outcomeDenied, true,
		useErrorText("Permission to use Bash was not granted: no permission decision within 300ms, so the call was denied."), "client")
	if pathExists(filepath.Join(root, "late.txt")) {
		t.Fatal("a call nobody allowed ran")
	}
	// An answer after the timeout changes nothing, and the session goes on.
	s.decide("t1", allowOnce, "")
	s.useTool("t2", "m2", "Bash", bashInput("echo next"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "next", "mode:default")
	if pathExists(filepath.Join(root, "late.txt")) {
		t.Fatal("a late allow ran the timed-out call")
	}
}

func TestPlanModeAllowsOnlyReadOnlyTools(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	writeFile(t, filepath.Join(root, "README"), "hello\n")
	s := h.openWith(settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModePlan}})
	planned := func(tool string) string {
		return useErrorText("Plan mode is on: only read-only tools may run, and this " + tool +
			" call could change something. Keep exploring with read-only tools, then present your plan instead of carrying it out.")
	}
	tests := []struct {
		id, tool, input string
		outcome         executorv1.Outcome
		isError         bool
		text            string
	}{
		{"write", "Write", `{"file_path":` + jsonString(filepath.Join(root, "new.txt")) + `,"content":"x"}`,
			outcomeDenied, true, planned("Write")},
		{"touch", "Bash", bashInput("touch new.txt"), outcomeDenied, true, planned("Bash")},
		{"read", "Read", `{"file_path":` + jsonString(filepath.Join(root, "README")) + `}`,
			outcomeOK, false, "1\thello\n2\t"},
		{"cat", "Bash", bashInput("cat README"), outcomeOK, false, "hello"},
	}
	for _, tt := range tests {
		s.useTool(tt.id, "m-"+tt.id, tt.tool, tt.input)
		wantResult(t, s.resultWithoutAsking(), tt.outcome, tt.isError, tt.text, "mode:plan")
	}
	if pathExists(filepath.Join(root, "new.txt")) {
		t.Fatal("plan mode let a call create new.txt")
	}
}

func TestPreToolUseHookBlocks(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	const hookCmd = `cat > pre-input.json; echo "touching files is not allowed here" >&2; exit 2`
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeBypass},
		Hooks: map[settings.Event][]settings.HookMatcher{settings.PreToolUse: {{
			Matcher: "Bash", Hooks: []settings.HookCommand{{Command: hookCmd}},
		}}},
	})
	s.useTool("b1", "m1", "Bash", bashInput("touch blocked.txt"))
	wantResult(t, s.resultWithoutAsking(), outcomeDenied, true,
		useErrorText("PreToolUse hook blocked this Bash call: touching files is not allowed here"),
		"PreToolUse[Bash] "+hookCmd)
	if pathExists(filepath.Join(root, "blocked.txt")) {
		t.Fatal("the blocked command ran")
	}

	// What the hook read on stdin.
	b, err := os.ReadFile(filepath.Join(root, "pre-input.json"))
	if err != nil {
		t.Fatalf("the hook did not run or could not save its input: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("hook input is not JSON: %v\n%s", err, b)
	}
	want := map[string]any{
		"session_id":      s.hello.GetSessionId(),
		"transcript_path": "",
		"cwd":             root,
		"hook_event_name": "PreToolUse",
		"tool_name":       "Bash",
		"tool_input":      map[string]any{"command": "touch blocked.txt"},
		"tool_use_id":     "b1",
		"permission_mode": "bypassPermissions",
	}
	if !sameJSON(string(b), mustJSON(t, want)) {
		t.Errorf("hook input\n got %s\nwant %s", b, mustJSON(t, want))
	}

	// Tools the matcher does not name are not blocked.
	s.useTool("g", "m2", "Glob", `{"pattern":"*.json"}`)
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "pre-input.json", "mode:bypassPermissions")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPreToolUseHookRewritesInput(t *testing.T) {
	// The hook reads the command from its input and replaces "original"
	// by "rewritten", or "look" by "rm -f".
	const hookCmd = `in=$(cat); c=$(printf '%s' "$in" | sed -n 's/.*"command":"\([^"]*\)".*/\1/p'); ` +
		`c=${c/original/rewritten}; c=${c/look/rm -f}; ` +
		`printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"%s"}}}' "$c"`
	hooks := map[settings.Event][]settings.HookMatcher{settings.PreToolUse: {{
		Matcher: "Bash", Hooks: []settings.HookCommand{{Command: hookCmd}},
	}}}
	h, root := permHarness(t, execsvc.Config{})
	writeFile(t, filepath.Join(root, "victim.txt"), "keep me\n")
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeBypass, Deny: []string{"Bash(rm:*)"}},
		Hooks:       hooks,
	})

	s.useTool("r", "m1", "Bash", bashInput("echo original"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "rewritten",
		"mode:bypassPermissions; PreToolUse[Bash] "+hookCmd)

	// The rewrite is checked against the rules again: it cannot reach a
	// command a deny rule forbids.
	s.useTool("d", "m2", "Bash", bashInput("look victim.txt"))
	wantResult(t, s.resultWithoutAsking(), outcomeDenied, true,
		useErrorText("Permission denied by rule Bash(rm:*): Bash may not run the command rm -f victim.txt"),
		"session:Bash(rm:*)")
	if !pathExists(filepath.Join(root, "victim.txt")) {
		t.Fatal("the rewritten rm ran despite the deny rule")
	}
}

// Read works out its path once, before the permission step, and reads
// that path; a PreToolUse hook that rewrites the input makes it read the
// rewritten path instead, checked again.
func TestPreToolUseHookRewritesReadPath(t *testing.T) {
	const hookCmd = `in=$(cat); p=$(printf '%s' "$in" | sed -n 's/.*"file_path":"\([^"]*\)".*/\1/p'); ` +
		`printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"file_path":"%s"}}}' "${p/asked/rewritten}"`
	h, root := permHarness(t, execsvc.Config{})
	asked, rewritten, other := filepath.Join(root, "asked.txt"), filepath.Join(root, "rewritten.txt"), filepath.Join(root, "other.txt")
	writeFile(t, asked, "asked for\n")
	writeFile(t, rewritten, "rewritten to\n")
	writeFile(t, other, "no hook\n")
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeBypass},
		Hooks: map[settings.Event][]settings.HookMatcher{settings.PreToolUse: {{
			Matcher: "Read", Hooks: []settings.HookCommand{{Command: hookCmd}},
		}}},
	})
	s.useTool("r1", "m1", "Read", `{"file_path":`+jsonString(asked)+`}`)
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "1\trewritten to\n2\t",
		"mode:bypassPermissions; PreToolUse[Read] "+hookCmd)
	s.useTool("r2", "m2", "Read", `{"file_path":`+jsonString(other)+`}`)
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "1\tno hook\n2\t",
		"mode:bypassPermissions; PreToolUse[Read] "+hookCmd)
}

func TestPostToolUseHookFormatsTheEditedFile(t *testing.T) {
	// A formatter: upper-cases the file the call wrote.
	const hookCmd = `in=$(cat); printf '%s' "$in" > "$CLAUDE_PROJECT_DIR/post-input.json"; ` +
		`f=$(printf '%s' "$in" | sed -n 's/.*"file_path":"\([^"]*\)".*/\1/p'); ` +
		`tr 'a-z' 'A-Z' < "$f" > "$f.fmt" && mv "$f.fmt" "$f"`
	h, root := permHarness(t, execsvc.Config{})
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeAcceptEdits, Allow: []string{"Bash"}},
		Hooks: map[settings.Event][]settings.HookMatcher{settings.PostToolUse: {{
			Matcher: "Write|Edit", Hooks: []settings.HookCommand{{Command: hookCmd}},
		}}},
	})
	target := filepath.Join(root, "main.txt")
	s.useTool("w", "m1", "Write", `{"file_path":`+jsonString(target)+`,"content":"hello world\n"}`)
	written := "File created successfully at: " + target + " (file state is current in your context — no need to Read it back)"
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, written, "mode:acceptEdits")
	if b, err := os.ReadFile(target); err != nil || string(b) != "HELLO WORLD\n" {
		t.Fatalf("after the Write the file holds %q (%v), want it formatted", b, err)
	}
	b, err := os.ReadFile(filepath.Join(root, "post-input.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Event    string          `json:"hook_event_name"`
		Tool     string          `json:"tool_name"`
		Input    json.RawMessage `json:"tool_input"`
		Response json.RawMessage `json:"tool_response"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	wantResponse := mustJSON(t, map[string]any{"output": written, "is_error": false})
	if in.Event != "PostToolUse" || in.Tool != "Write" || !sameJSON(string(in.Input), `{"file_path":`+jsonString(target)+`,"content":"hello world\n"}`) ||
		!sameJSON(string(in.Response), wantResponse) {
		t.Errorf("PostToolUse hook input: %s\nwant tool_response %s", b, wantResponse)
	}

	// The session's record of the file is now stale: an Edit must read it
	// first, as after any outside change.
	s.useTool("e", "m-e", "Edit", `{"file_path":`+jsonString(target)+`,"old_string":"HELLO","new_string":"BYE"}`)
	wantResult(t, s.resultWithoutAsking(), executorv1.Outcome_OUTCOME_INVALID_INPUT, true,
		useErrorText("File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."), "")

	// Tools the matcher does not name are left alone.
	s.useTool("b", "m2", "Bash", bashInput("echo lower > other.txt"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, noOutput, "session:Bash")
	if b, _ := os.ReadFile(filepath.Join(root, "other.txt")); string(b) != "lower\n" {
		t.Errorf("a Bash call was formatted: %q", b)
	}
}

func TestHangingHookTimesOut(t *testing.T) {
	var logs testkit.Buffer
	h, _ := permHarness(t, execsvc.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const hang = `sleep 600 & sleep 600`
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeBypass},
		Hooks: map[settings.Event][]settings.HookMatcher{
			settings.PreToolUse:  {{Matcher: "Bash", Hooks: []settings.HookCommand{{Command: hang, Timeout: time.Second}}}},
			settings.PostToolUse: {{Matcher: "*", Hooks: []settings.HookCommand{{Command: hang, Timeout: time.Second}}}},
		},
	})
	s.useTool("c", "m1", "Bash", bashInput("echo done"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "done", "mode:bypassPermissions")
	for _, label := range []string{"PreToolUse[Bash]", "PostToolUse[*]"} {
		want := "hook " + label + " " + hang + " timed out after 1s and was killed"
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	// The hooks and what they started are gone by the time the call has
	// its Result, not only when the session ends.
	for _, p := range sandboxtest.Descendants() {
		if strings.Contains(p, "sleep") {
			t.Errorf("hook process still running after the call: %s", p)
		}
	}
	// permHarness's cleanup checks again after the executor closed.
}

func TestOperatorRulesCannotBeLoosened(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{Operator: settings.Settings{Permissions: settings.Permissions{
		Deny: []string{"Bash(rm:*)"},
	}}})
	victim := filepath.Join(root, "victim.txt")
	writeFile(t, victim, "keep me\n")
	s := h.openWith(settings.Settings{Permissions: settings.Permissions{
		DefaultMode: permission.ModeBypass,
		Allow:       []string{"Bash(rm:*)", "Bash"},
	}})
	const by = "Permission denied by rule Bash(rm:*) (set by the operator): Bash may not run the command "
	const doubt = "cannot tell whether rule Bash(rm:*) denies running"
	const hidden = "; the command hides part of what it runs"
	// Each command would remove victim.txt if it ran. A deny rule must
	// catch it through quoting, paths and wrappers; what cannot be read
	// from the text is asked about (and the test denies it), never run.
	tests := []struct {
		cmd    string
		denied string // the denial's text, or
		asked  string // the permission request's reason
	}{
		{cmd: "rm -f victim.txt", denied: by + "rm -f victim.txt"},
		{cmd: "/bin/rm -f victim.txt", denied: by + "/bin/rm -f victim.txt"},
		{cmd: `'r'"m" -f victim.txt`, denied: by + `'r'"m" -f victim.txt (the part rm -f victim.txt)`},
		{cmd: `bash -c 'rm -f victim.txt'`, denied: by + `bash -c 'rm -f victim.txt' (the part rm -f victim.txt)`},
		{cmd: "env LC_ALL=C rm -f victim.txt", denied: by + "env LC_ALL=C rm -f victim.txt (the part rm -f victim.txt)"},
		{cmd: "echo ok && rm -f victim.txt", denied: by + "echo ok && rm -f victim.txt (the part rm -f victim.txt)"},
		{cmd: "echo victim.txt | xargs rm -f", denied: by + "echo victim.txt | xargs rm -f (the part rm -f {stdin})"},
		{cmd: `find . -name victim.txt -exec rm {} \;`, denied: by + `find . -name victim.txt -exec rm {} \; (the part rm {})`},
		{cmd: `eval "rm -f victim.txt"`, denied: by + `eval "rm -f victim.txt" (the part rm -f victim.txt)`},
		{cmd: `c=rm; $c -f victim.txt`, asked: doubt + " $c -f victim.txt in: c=rm; $c -f victim.txt" + hidden},
		{cmd: `$(echo rm) -f victim.txt`, asked: doubt + ": $(echo rm) -f victim.txt" + hidden},
		{cmd: `echo 'rm -f victim.txt' | bash`, asked: doubt + " bash in: echo 'rm -f victim.txt' | bash" + hidden},
	}
	for i, tt := range tests {
		id := "rm" + string(rune('a'+i))
		s.useTool(id, "m-"+id, "Bash", bashInput(tt.cmd))
		if tt.asked != "" {
			q := s.awaitRequest()
			wantRequest(t, q, id, "Bash", bashInput(tt.cmd), tt.asked, "")
			s.decide(id, denyIt, "")
			wantResult(t, s.results(1)[0], outcomeDenied, true, useErrorText("The user denied permission to use Bash."), "client")
		} else {
			wantResult(t, s.resultWithoutAsking(), outcomeDenied, true, useErrorText(tt.denied), "operator:Bash(rm:*)")
		}
		if !pathExists(victim) {
			t.Fatalf("%s: the operator's deny was dodged", tt.cmd)
		}
	}
	// The session's own rules still work for everything else.
	s.useTool("ok", "m-ok", "Bash", bashInput("touch fine.txt"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, noOutput, "session:Bash")
}

func TestOperatorCanDisableBypassMode(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{Operator: settings.Settings{Permissions: settings.Permissions{
		DisableBypass: true,
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := h.client.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		Settings: settingspb.ToProto(settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}})}}}
	if err := st.Send(open); err != nil {
		t.Fatal(err)
	}
	// A call sent at once must not run. The server may already have ended
	// the stream, so the send may fail.
	_ = st.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: "t", Name: "Bash", InputJson: bashInput("touch bypassed.txt"), AssistantMessageId: "m1"}}})
	ev, err := st.Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bypassPermissions mode is disabled by the operator") {
		t.Fatalf("Recv = %v, %v; want InvalidArgument saying bypass is disabled", ev, err)
	}
	if pathExists(filepath.Join(root, "bypassed.txt")) {
		t.Fatal("a call ran in a session the executor refused")
	}

	// The same operator accepts sessions in other modes.
	s := h.openWith(settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeAcceptEdits}})
	s.useTool("e", "m1", "Bash", bashInput("echo hi"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "hi", "mode:acceptEdits")
}

func TestPreToolUseHookAllowAnswersOnlyTheModesQuestion(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	const allowHook = `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"touch is fine"}}'`
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeDefault, Ask: []string{"Bash(mkdir:*)"}},
		Hooks: map[settings.Event][]settings.HookMatcher{settings.PreToolUse: {{
			Matcher: "Bash", Hooks: []settings.HookCommand{{Command: allowHook}},
		}}},
	})
	// Default mode would ask about touch; the hook's allow answers that.
	s.useTool("t", "m1", "Bash", bashInput("touch ok.txt"))
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "(Bash completed with no output)", "PreToolUse[Bash] "+allowHook)
	if !pathExists(filepath.Join(root, "ok.txt")) {
		t.Fatal("the allowed command did not run")
	}
	// An ask rule still asks, whatever the hook says.
	s.useTool("m", "m2", "Bash", bashInput("mkdir d"))
	req := s.awaitRequest()
	if req.GetToolUseId() != "m" {
		t.Fatalf("permission request %v", req)
	}
	s.decide("m", executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_DENY, "")
	if r := s.results(1)[0]; r.GetOutcome() != outcomeDenied || pathExists(filepath.Join(root, "d")) {
		t.Fatalf("ask rule overridden by a hook: %v", r)
	}
}
