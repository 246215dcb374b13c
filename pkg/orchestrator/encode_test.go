package orchestrator

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// TestSnapshotEncodings checks that the encodings a session reuses are
// always those of its messages: as they grow, when a user message is
// joined to the last, and when the list is cut (a rewind) and grows again
// with other messages. A snapshot is the session's own lists, which
// requests hold while the session goes on: every snapshot taken must still
// hold, at the end, what it held when it was taken.
func TestSnapshotEncodings(t *testing.T) {
	s := &Session{}
	type taken struct {
		step     string
		msgs     []model.Message
		raws     []json.RawMessage
		wantMsgs string // the lists' JSON when taken
		wantRaws string
	}
	var snapshots []taken
	check := func(step string) {
		t.Helper()
		msgs, raws, err := s.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		wantMsgs, _ := json.Marshal(msgs)
		wantRaws, _ := json.Marshal(raws)
		snapshots = append(snapshots, taken{step, msgs, raws, string(wantMsgs), string(wantRaws)})
		if len(raws) != max(len(msgs)-1, 0) {
			t.Fatalf("%s: %d encodings for %d messages", step, len(raws), len(msgs))
		}
		for i, raw := range raws {
			want, err := model.EncodeMessage(msgs[i])
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != string(want) {
				t.Errorf("%s: message %d sent as %s, want %s", step, i, raw, want)
			}
		}
	}
	add := func(role model.Role, text string) {
		s.messages = transcript.AppendMessage(s.messages, model.Message{Role: role, Content: []model.Block{model.TextBlock(text)}})
	}
	check("empty")
	for i := range 4 {
		add(model.RoleUser, fmt.Sprintf("question %d", i))
		check("after a user message")
		add(model.RoleAssistant, fmt.Sprintf("answer %d", i))
		check("after an answer")
	}
	add(model.RoleUser, "more")
	add(model.RoleAssistant, "ok")
	check("grown")
	add(model.RoleUser, "joined")
	check("before a join")
	add(model.RoleUser, "to it")
	add(model.RoleAssistant, "done")
	check("after a join")
	s.cutLocked(3) // a rewind
	check("after a cut")
	add(model.RoleAssistant, "other answer")
	add(model.RoleUser, "other question")
	add(model.RoleAssistant, "other answer 2")
	add(model.RoleUser, "other question 2")
	check("after a cut and other messages")
	s.cutLocked(4)
	s.messages = append(s.messages, model.Message{Role: model.RoleAssistant}) // no content
	add(model.RoleUser, "last")
	check("with a message without content")
	s.cutLocked(2)
	add(model.RoleAssistant, "after the one without content")
	add(model.RoleUser, "and on")
	check("after a second cut")
	for _, sn := range snapshots {
		gotMsgs, _ := json.Marshal(sn.msgs)
		gotRaws, _ := json.Marshal(sn.raws)
		if string(gotMsgs) != sn.wantMsgs || string(gotRaws) != sn.wantRaws {
			t.Errorf("the snapshot taken %s changed since:\nmessages %s\nwere     %s\nencodings %s\nwere      %s", sn.step, gotMsgs, sn.wantMsgs, gotRaws, sn.wantRaws)
		}
	}
}

// BenchmarkSnapshot takes the snapshot of a request at turn 200 of
// BenchmarkTurnOverhead's conversation (799 messages, all but the newest
// encoded already): the part of a request's own work that the length of
// the conversation could make grow.
func BenchmarkSnapshot(b *testing.B) {
	s := &Session{}
	for turn := range 200 {
		use := model.Block{Type: model.BlockToolUse, ID: fmt.Sprintf("toolu_%d", turn), Name: "Read", Input: json.RawMessage(`{"file_path":"/w/f.txt"}`)}
		for _, m := range []model.Message{
			{Role: model.RoleUser, Content: []model.Block{model.TextBlock(fmt.Sprintf("turn %d: read the file", turn))}},
			{Role: model.RoleAssistant, Content: []model.Block{use}},
			{Role: model.RoleUser, Content: []model.Block{model.ToolResultBlock(use.ID, []model.Block{model.TextBlock("1\tline one\n2\tline two")}, nil)}},
			{Role: model.RoleAssistant, Content: []model.Block{model.TextBlock("done")}},
		} {
			s.messages = transcript.AppendMessage(s.messages, m)
		}
	}
	s.messages = s.messages[:len(s.messages)-1]
	if _, _, err := s.snapshot(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.snapshot(); err != nil {
			b.Fatal(err)
		}
	}
}
