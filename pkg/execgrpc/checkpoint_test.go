package execgrpc_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
	"github.com/toolwire/toolwire/pkg/tool"
)

func (s *stream) listCheckpoints() *executorv1.CheckpointList {
	s.t.Helper()
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ListCheckpoints{ListCheckpoints: &executorv1.ListCheckpoints{RequestId: "l"}}})
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetCheckpointList() != nil })
	l := evs[len(evs)-1].GetCheckpointList()
	if l.GetRequestId() != "l" {
		s.t.Fatalf("list answers request %q", l.GetRequestId())
	}
	return l
}

func (s *stream) restore(id string) *executorv1.RestoreResult {
	s.t.Helper()
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_RestoreCheckpoint{RestoreCheckpoint: &executorv1.RestoreCheckpoint{RequestId: "r-" + id, ToolUseId: id}}})
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool { return ev.GetRestoreResult() != nil })
	r := evs[len(evs)-1].GetRestoreResult()
	if r.GetRequestId() != "r-"+id || r.GetToolUseId() != id {
		s.t.Fatalf("restore answers %q for %q", r.GetRequestId(), r.GetToolUseId())
	}
	return r
}

// okResults runs the calls one by one and fails on any is_error result.
func (s *stream) okCalls(calls ...[3]string) {
	s.t.Helper()
	for _, c := range calls {
		s.useTool(c[0], "m-"+c[0], c[1], c[2])
		if r := s.results(1)[0]; r.GetIsError() {
			s.t.Fatalf("%s: %s", c[0], text(r))
		}
	}
}

// state is a file's bytes and mode, or its absence.
type state struct {
	data   string
	mode   fs.FileMode
	exists bool
}

func stateOf(t *testing.T, path string) state {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return state{}
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return state{data: string(data), mode: fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSetuid | fs.ModeSticky), exists: true}
}

func checkpointHarness(t *testing.T, maxBytes int64, set settings.Settings) (*harness, string) {
	if set.Permissions.DefaultMode == "" {
		set.Permissions.DefaultMode = permission.ModeBypass
	}
	return permHarness(t, execsvc.Config{Operator: set, Limits: tool.Limits{MaxCheckpointBytes: maxBytes}})
}

const notebook = `{"cells":[{"cell_type":"code","id":"c1","metadata":{},"source":["print(1)"],"outputs":[],"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}` + "\n"

// Edit, Write and NotebookEdit record each file's state before they change
// it; a restore to the state before a call puts back the bytes and mode
// of every file changed since, removes the files created since, and
// leaves earlier changes alone.
func TestCheckpointRestoreIsExact(t *testing.T) {
	h, root := checkpointHarness(t, 0, settings.Settings{})
	a, b, c, nb, early := filepath.Join(root, "a.txt"), filepath.Join(root, "sub", "b.txt"), filepath.Join(root, "c.txt"), filepath.Join(root, "n.ipynb"), filepath.Join(root, "early.txt")
	writeFile(t, a, "alpha\r\nline two\r\n")
	writeFile(t, nb, notebook)
	writeFile(t, early, "early\n")
	if err := os.Chmod(a, 0o640|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(nb, 0o600); err != nil {
		t.Fatal(err)
	}
	before := map[string]state{a: stateOf(t, a), b: stateOf(t, b), c: stateOf(t, c), nb: stateOf(t, nb)}
	s := h.open(nil)
	s.okCalls(
		[3]string{"r0", "Read", `{"file_path":"` + early + `"}`},
		[3]string{"w0", "Write", `{"file_path":"` + early + `","content":"changed before\n"}`},
		[3]string{"r1", "Read", `{"file_path":"` + a + `"}`},
		[3]string{"e1", "Edit", `{"file_path":"` + a + `","old_string":"alpha","new_string":"beta"}`},
		[3]string{"x1", "Bash", `{"command":"chmod 755 a.txt"}`},
		[3]string{"w1", "Write", `{"file_path":"` + b + `","content":"new file\n"}`},
		[3]string{"w2", "Write", `{"file_path":"` + c + `","content":"another\n"}`},
		[3]string{"r2", "Read", `{"file_path":"` + nb + `"}`},
		[3]string{"n1", "NotebookEdit", `{"notebook_path":"` + nb + `","cell_id":"c1","new_source":"print(2)"}`},
		[3]string{"e2", "Edit", `{"file_path":"` + c + `","old_string":"another","new_string":"again"}`},
	)
	l := s.listCheckpoints()
	var ids []string
	for _, cp := range l.GetCheckpoints() {
		ids = append(ids, cp.GetToolUseId()+":"+cp.GetToolName())
	}
	if got := strings.Join(ids, " "); got != "w0:Write e1:Edit w1:Write w2:Write n1:NotebookEdit e2:Edit" {
		t.Fatalf("checkpoints %s", got)
	}
	if f := l.GetCheckpoints()[1].GetFiles()[0]; f.GetPath() != a || !f.GetExisted() || f.GetMode() != 0o2640 || f.GetSize() != uint64(len(before[a].data)) {
		t.Fatalf("e1's file %v", f)
	}
	if f := l.GetCheckpoints()[2].GetFiles()[0]; f.GetPath() != b || f.GetExisted() {
		t.Fatalf("w1's file %v", f)
	}
	if len(l.GetDroppedToolUseIds()) != 0 || l.GetBytes() == 0 || l.GetMaxBytes() != 64<<20 {
		t.Fatalf("list %v", l)
	}

	r := s.restore("e1")
	if r.GetError() != "" {
		t.Fatal(r.GetError())
	}
	var did []string
	for _, f := range r.GetFiles() {
		did = append(did, strings.TrimPrefix(f.GetPath(), root+"/")+":"+f.GetAction().String()+f.GetError())
	}
	if got := strings.Join(did, " "); got != "a.txt:RESTORE_ACTION_RESTORED c.txt:RESTORE_ACTION_REMOVED n.ipynb:RESTORE_ACTION_RESTORED sub/b.txt:RESTORE_ACTION_REMOVED" {
		t.Fatalf("restore did %s", got)
	}
	for p, want := range before {
		if got := stateOf(t, p); got != want {
			t.Errorf("%s: %+v, want %+v", p, got, want)
		}
	}
	if got := stateOf(t, early); got.data != "changed before\n" {
		t.Errorf("a change before the checkpoint was undone: %+v", got)
	}
	// The restored checkpoints are gone; the earlier one stays.
	if cps := s.listCheckpoints().GetCheckpoints(); len(cps) != 1 || cps[0].GetToolUseId() != "w0" {
		t.Fatalf("checkpoints after the restore: %v", cps)
	}
	// The model may edit the restored file as it was before the call.
	s.okCalls([3]string{"e3", "Edit", `{"file_path":"` + a + `","old_string":"alpha","new_string":"gamma"}`})
	if r := s.restore("e1"); !strings.Contains(r.GetError(), "no checkpoint") || len(r.GetFiles()) != 0 {
		t.Fatalf("restore of a restored checkpoint: %v", r)
	}
}

// Checkpoints belong to the session, not to its stream: a client that
// lost its stream resumes and restores.
func TestCheckpointRestoreAfterReconnect(t *testing.T) {
	h, root := checkpointHarness(t, 0, settings.Settings{})
	p := filepath.Join(root, "f.txt")
	writeFile(t, p, "one\n")
	want := stateOf(t, p)
	s := h.open(nil)
	id := s.hello.GetSessionId()
	s.okCalls(
		[3]string{"r", "Read", `{"file_path":"` + p + `"}`},
		[3]string{"w", "Write", `{"file_path":"` + p + `","content":"two\n"}`},
	)
	s.cancel()
	<-s.errc
	r := h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{SessionId: id}}})
	if !r.hello.GetResumed() {
		t.Fatalf("hello %v", r.hello)
	}
	if res := r.restore("w"); res.GetError() != "" || len(res.GetFiles()) != 1 || res.GetFiles()[0].GetAction() != executorv1.RestoreAction_RESTORE_ACTION_RESTORED {
		t.Fatalf("restore after resume: %v", res)
	}
	if got := stateOf(t, p); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// A restore is a write like any other: a deny rule refuses it (and the
// checkpoint stays), and files it may write are still restored.
func TestCheckpointRestoreRefusedByDenyRule(t *testing.T) {
	h, root := checkpointHarness(t, 0, settings.Settings{})
	keep, free := filepath.Join(root, "keep.txt"), filepath.Join(root, "free.txt")
	writeFile(t, keep, "kept\n")
	s := h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		Settings: settingspb.ToProto(settings.Settings{Permissions: settings.Permissions{Deny: []string{"Write(keep.txt)"}, DefaultMode: permission.ModeBypass}})}}})
	s.okCalls(
		[3]string{"r", "Read", `{"file_path":"` + keep + `"}`},
		[3]string{"e", "Edit", `{"file_path":"` + keep + `","old_string":"kept","new_string":"edited"}`},
		[3]string{"w", "Write", `{"file_path":"` + free + `","content":"free\n"}`},
	)
	res := s.restore("e")
	if len(res.GetFiles()) != 2 {
		t.Fatalf("restore %v", res)
	}
	if f := res.GetFiles()[1]; f.GetPath() != keep || f.GetAction() != executorv1.RestoreAction_RESTORE_ACTION_FAILED || f.GetError() != "denied by the session rule Write(keep.txt)" {
		t.Fatalf("keep.txt: %v", f)
	}
	if f := res.GetFiles()[0]; f.GetPath() != free || f.GetAction() != executorv1.RestoreAction_RESTORE_ACTION_REMOVED {
		t.Fatalf("free.txt: %v", f)
	}
	if got := stateOf(t, keep); got.data != "edited\n" {
		t.Fatalf("the denied file was restored: %+v", got)
	}
	if _, err := os.Stat(free); !os.IsNotExist(err) {
		t.Fatalf("free.txt: %v", err)
	}
	if cps := s.listCheckpoints().GetCheckpoints(); len(cps) != 2 {
		t.Fatalf("a partial restore forgot the checkpoints: %v", cps)
	}
}

// The checkpoints of a session hold at most their bound of previous
// content: the oldest go first, the list says which, and restoring to a
// dropped one is refused with nothing changed.
func TestCheckpointSizeBound(t *testing.T) {
	h, root := checkpointHarness(t, 2500, settings.Settings{})
	s := h.open(nil)
	var calls [][3]string
	for i, name := range []string{"f1", "f2", "f3"} {
		p := filepath.Join(root, name)
		writeFile(t, p, string(bytes.Repeat([]byte{byte('a' + i)}, 1000)))
		calls = append(calls,
			[3]string{"r" + name, "Read", `{"file_path":"` + p + `"}`},
			[3]string{"w" + name, "Write", `{"file_path":"` + p + `","content":"short"}`})
	}
	s.okCalls(calls...)
	l := s.listCheckpoints()
	if len(l.GetCheckpoints()) != 2 || l.GetCheckpoints()[0].GetToolUseId() != "wf2" || strings.Join(l.GetDroppedToolUseIds(), ",") != "wf1" ||
		l.GetBytes() != 2000 || l.GetMaxBytes() != 2500 {
		t.Fatalf("list %v", l)
	}
	if r := s.restore("wf1"); !strings.Contains(r.GetError(), "dropped") || len(r.GetFiles()) != 0 {
		t.Fatalf("restore to a dropped checkpoint: %v", r)
	}
	if got := stateOf(t, filepath.Join(root, "f1")); got.data != "short" {
		t.Fatalf("f1 changed: %+v", got)
	}
	if r := s.restore("wf2"); r.GetError() != "" || len(r.GetFiles()) != 2 {
		t.Fatalf("restore to a kept checkpoint: %v", r)
	}
	if got := stateOf(t, filepath.Join(root, "f2")); got.data != strings.Repeat("b", 1000) {
		t.Fatalf("f2: %+v", got)
	}
}
