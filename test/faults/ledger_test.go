package faults_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// A script is what the fake model asks for in one conversation: rounds of
// tool calls, then a final answer. Each Bash call appends a line to
// ledger/<id> in the workspace, sleeps, and prints ok-<id>.
type script struct {
	tag    string
	rounds [][]call
}

type call struct {
	id, tool string
	input    map[string]any
}

// newScript makes rounds of calls for conversation tag: in each round, a
// Read and a Glob (safe, run in parallel) and bashPerRound Bash calls
// sleeping sleep seconds (each a barrier: it writes a file).
func newScript(tag string, rounds, bashPerRound int, sleep float64) *script {
	s := &script{tag: tag}
	for r := range rounds {
		var cs []call
		id := func(i int) string { return fmt.Sprintf("toolu_%s_r%d_%d", tag, r, i) }
		cs = append(cs, call{id: id(0), tool: "Read", input: map[string]any{"file_path": "README"}})
		cs = append(cs, call{id: id(1), tool: "Glob", input: map[string]any{"pattern": "*"}})
		for i := range bashPerRound {
			bid := id(2 + i)
			cs = append(cs, call{id: bid, tool: "Bash", input: map[string]any{
				"command": fmt.Sprintf("printf 'x\\n' >> ledger/%s; sleep %g; echo ok-%s", bid, sleep, bid),
			}})
		}
		s.rounds = append(s.rounds, cs)
	}
	return s
}

func (s *script) prompt() string { return "conversation " + s.tag }

// model serves every script: a request belongs to the script whose tag
// its first user message names, and is answered by the round after the
// assistant messages it already holds.
type model struct {
	mu      sync.Mutex
	scripts map[string]*script
}

func newModel(t *testing.T) (*fakeapi.Server, *model) {
	m := &model{scripts: map[string]*script{}}
	srv := fakeapi.New(t)
	srv.SetFallback(m.reply)
	return srv, m
}

func (m *model) add(s *script) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scripts[s.tag] = s
}

func (m *model) reply(r *fakeapi.Request) fakeapi.Reply {
	msgs := r.Body.Messages
	if len(msgs) == 0 {
		return fakeapi.EndTurn(fakeapi.Text("no messages"))
	}
	first := msgs[0].Text()
	m.mu.Lock()
	var s *script
	for tag, sc := range m.scripts {
		if strings.Contains(first, "conversation "+tag) {
			s = sc
		}
	}
	m.mu.Unlock()
	if s == nil {
		return fakeapi.EndTurn(fakeapi.Text("unknown conversation"))
	}
	round := 0
	for _, msg := range msgs {
		if msg.Role == "assistant" {
			round++
		}
	}
	if round >= len(s.rounds) {
		return fakeapi.EndTurn(fakeapi.Text("done " + s.tag))
	}
	var blocks []fakeapi.Block
	for _, c := range s.rounds[round] {
		blocks = append(blocks, fakeapi.ToolUse(c.id, c.tool, c.input))
	}
	return fakeapi.ToolTurn(blocks...)
}

// outcome is what a transcript shows of one tool_use.
type outcome struct {
	tool    string
	results int
	isError bool
	text    string
}

// ledger is the account of every tool_use of some conversations.
type ledger struct {
	calls map[string]*outcome
	// orphans are tool_results without a tool_use.
	orphans []string
}

// readLedger reads the transcript of session id from the sessions
// directory.
func readLedger(t *testing.T, sessions string, ids ...string) *ledger {
	t.Helper()
	l := &ledger{calls: map[string]*outcome{}}
	for _, id := range ids {
		f, err := os.Open(filepath.Join(sessions, id+".jsonl"))
		if err != nil {
			t.Fatalf("transcript of %s: %v", id, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var rec struct {
				Type    string `json:"type"`
				Message *struct {
					Role    string `json:"role"`
					Content []struct {
						Type      string          `json:"type"`
						ID        string          `json:"id"`
						Name      string          `json:"name"`
						ToolUseID string          `json:"tool_use_id"`
						IsError   bool            `json:"is_error"`
						Content   json.RawMessage `json:"content"`
					} `json:"content"`
				} `json:"message"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("transcript of %s: %v", id, err)
			}
			if rec.Type != "message" || rec.Message == nil {
				continue
			}
			for _, b := range rec.Message.Content {
				switch b.Type {
				case "tool_use":
					if l.calls[b.ID] != nil {
						t.Errorf("tool_use %s appears twice in the transcript", b.ID)
						continue
					}
					l.calls[b.ID] = &outcome{tool: b.Name}
				case "tool_result":
					o := l.calls[b.ToolUseID]
					if o == nil {
						l.orphans = append(l.orphans, b.ToolUseID)
						continue
					}
					o.results++
					o.isError = b.IsError
					o.text = resultText(b.Content)
				}
			}
		}
		f.Close()
	}
	return l
}

func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return strings.Join(out, "")
}

// tally counts ledger checks over the whole suite, for the summary.
var tally struct {
	sync.Mutex
	uses, results, ran, interrupted int
}

// check asserts the ledger's rules for the calls of the given scripts:
// every tool_use that reached the transcript got exactly one tool_result;
// no Bash call ran twice (its ledger file has at most one line); a Bash
// call reported successful ran exactly once and printed its mark; a call
// reported interrupted says so. It returns how many calls were
// interrupted.
func (l *ledger) check(t *testing.T, root string, scripts ...*script) (interrupted int) {
	t.Helper()
	if len(l.orphans) > 0 {
		t.Errorf("tool_results without a tool_use: %v", l.orphans)
	}
	for _, s := range scripts {
		for _, round := range s.rounds {
			for _, c := range round {
				o := l.calls[c.id]
				if o == nil {
					continue // the conversation ended before the model asked for it
				}
				if o.results != 1 {
					t.Errorf("%s (%s) got %d tool_results, want exactly 1", c.id, c.tool, o.results)
				}
				if strings.Contains(o.text, "Interrupted") {
					interrupted++
				} else if o.isError {
					// The script asks for nothing that fails: an error that
					// is not an interruption is a fault of ours.
					t.Errorf("%s (%s) failed: %s", c.id, c.tool, o.text)
				}
				if c.tool != "Bash" {
					continue
				}
				ran := countLines(t, filepath.Join(root, "ledger", c.id))
				if ran > 1 {
					t.Errorf("%s ran %d times", c.id, ran)
				}
				if !o.isError && (ran != 1 || !strings.Contains(o.text, "ok-"+c.id)) {
					t.Errorf("%s reported success but ran %d times; result %q", c.id, ran, o.text)
				}
				tally.Lock()
				tally.ran += ran
				tally.Unlock()
			}
		}
	}
	tally.Lock()
	for _, o := range l.calls {
		tally.uses++
		tally.results += o.results
	}
	tally.interrupted += interrupted
	tally.Unlock()
	return interrupted
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
