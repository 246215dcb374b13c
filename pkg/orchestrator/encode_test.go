package orchestrator

import (
	"fmt"
	"testing"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// TestSnapshotEncodings checks that the encodings a session reuses are
// always those of its messages: as they grow, when a user message is
// joined to the last, and when the list is cut (a rewind) and grows again
// with other messages.
func TestSnapshotEncodings(t *testing.T) {
	s := &Session{}
	check := func(step string) {
		t.Helper()
		msgs, raws, err := s.snapshot()
		if err != nil {
			t.Fatal(err)
		}
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
	add(model.RoleUser, "to it")
	add(model.RoleAssistant, "done")
	check("after a join")
	s.messages = s.messages[:3] // a rewind
	check("after a cut")
	add(model.RoleAssistant, "other answer")
	add(model.RoleUser, "other question")
	add(model.RoleAssistant, "other answer 2")
	add(model.RoleUser, "other question 2")
	check("after a cut and other messages")
	s.messages = append(s.messages[:4:4], model.Message{Role: model.RoleAssistant}) // no content
	add(model.RoleUser, "last")
	check("with a message without content")
}
