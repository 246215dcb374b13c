package transcript

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

func userMsg(blocks ...model.Block) model.Message {
	return model.Message{Role: model.RoleUser, Content: blocks}
}

func TestStoreRoundTrip(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "sessions"), Options{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{
		Model: "m", MaxTurns: 7, DisallowedTools: []string{"Write"},
		Settings: &settings.Settings{
			Permissions: settings.Permissions{Allow: []string{"Read"}, Deny: []string{"Bash(rm:*)"}, DefaultMode: permission.ModePlan},
			Hooks: map[settings.Event][]settings.HookMatcher{
				settings.PreToolUse: {{Matcher: "Bash", Hooks: []settings.HookCommand{{Command: "check", Timeout: 1500 * time.Millisecond}, {Command: "log"}}}},
			},
		},
		Options: &execapi.SessionOptions{ResultOrder: execapi.OrderCompletion, NoSiblingAbort: true, MaxConcurrency: 2,
			DefaultTimeout: 90 * time.Second, PermissionTimeout: time.Minute},
		MCPServers: mcpclient.Servers{
			"ex":   {Command: "/bin/ex", Args: []string{"-v"}, Env: map[string]string{"K": "v"}},
			"docs": {Type: "http", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer ${T}"}},
		},
		RequireSandbox: []string{"landlock", "network:none"},
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := st.Create("s1", cfg, created); err != nil {
		t.Fatal(err)
	}
	if err := st.Create("s1", cfg, created); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	isErr := true
	msgs := []model.Message{
		userMsg(model.TextBlock("hi")),
		{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "t1", Name: "Bash", Input: json.RawMessage(`{"command":"false"}`)}}},
		userMsg(model.ToolResultBlock("t1", []model.Block{model.TextBlock("Exit code 1")}, &isErr)),
		userMsg(model.TextBlock("[Request interrupted by user]")),
	}
	for _, m := range msgs {
		if err := st.Append("s1", Record{Kind: KindMessage, Time: time.Now(), Message: &m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Append("s1", Record{Kind: KindTurn, Turn: &Turn{StopReason: "interrupted", Usage: model.Usage{InputTokens: 5, OutputTokens: 2}}}); err != nil {
		t.Fatal(err)
	}
	st.Release("s1")

	tr, err := st.Load("s1")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Created.Equal(created) || tr.Turns != 1 || tr.Usage.InputTokens != 5 {
		t.Fatalf("loaded header/turns: %+v", tr)
	}
	if !reflect.DeepEqual(tr.Config.MCPServers, cfg.MCPServers) || !reflect.DeepEqual(tr.Config.RequireSandbox, cfg.RequireSandbox) {
		t.Errorf("MCP servers and sandbox requirements read back: %+v, %v", tr.Config.MCPServers, tr.Config.RequireSandbox)
	}
	if !reflect.DeepEqual(tr.Config.Settings, cfg.Settings) || !reflect.DeepEqual(tr.Config.Options, cfg.Options) ||
		tr.Config.Model != "m" || tr.Config.MaxTurns != 7 || !reflect.DeepEqual(tr.Config.DisallowedTools, []string{"Write"}) {
		t.Fatalf("config = %+v", tr.Config)
	}
	// The two trailing user messages come back as one.
	if len(tr.Messages) != 3 {
		t.Fatalf("%d messages, want 3: %+v", len(tr.Messages), tr.Messages)
	}
	last := tr.Messages[2]
	if len(last.Content) != 2 || last.Content[0].Type != model.BlockToolResult || *last.Content[0].IsError != true ||
		last.Content[1].Text != "[Request interrupted by user]" {
		t.Fatalf("merged message = %+v", last)
	}
}

// Transcripts written before the configuration had a version keep their
// settings and options as the protojson of the executor's wire messages
// (as below, which protojson.Marshal wrote); they load as they were.
func TestStoreReadsUnversionedConfig(t *testing.T) {
	dir := t.TempDir()
	const old = `{"type":"session","time":"2026-01-02T03:04:05Z","id":"s1","config":{"executor":"embedded","model":"m",` +
		`"settings":{"allow":["Read","Bash(git status:*)"],"ask":["Edit"],"deny":["Read(./.env)"],"mode":"PERMISSION_MODE_ACCEPT_EDITS",` +
		`"hooks":[{"event":"HOOK_EVENT_PRE_TOOL_USE","matcher":"Bash","commands":[{"command":"check","timeout":"1.500s"},{"command":"log"}]},` +
		`{"event":"HOOK_EVENT_POST_TOOL_USE","matcher":"Edit|Write","commands":[{"command":"fmt"}]}]},` +
		`"options":{"resultOrder":"RESULT_ORDER_COMPLETION","siblingAbort":"SIBLING_ABORT_DISABLED","maxConcurrency":3,"defaultTimeout":"90s","permissionTimeout":"60s"}}}` + "\n" +
		`{"type":"config","time":"2026-01-02T03:04:06Z","config":{"executor":"embedded","model":"m","settings":{"mode":"PERMISSION_MODE_PLAN"}}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "s1.jsonl"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var header Record
	if err := json.Unmarshal([]byte(strings.SplitN(old, "\n", 2)[0]), &header); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Executor: "embedded", Model: "m",
		Settings: &settings.Settings{
			Permissions: settings.Permissions{Allow: []string{"Read", "Bash(git status:*)"}, Ask: []string{"Edit"},
				Deny: []string{"Read(./.env)"}, DefaultMode: permission.ModeAcceptEdits},
			Hooks: map[settings.Event][]settings.HookMatcher{
				settings.PreToolUse:  {{Matcher: "Bash", Hooks: []settings.HookCommand{{Command: "check", Timeout: 1500 * time.Millisecond}, {Command: "log"}}}},
				settings.PostToolUse: {{Matcher: "Edit|Write", Hooks: []settings.HookCommand{{Command: "fmt"}}}},
			},
		},
		Options: &execapi.SessionOptions{ResultOrder: execapi.OrderCompletion, NoSiblingAbort: true, MaxConcurrency: 3,
			DefaultTimeout: 90 * time.Second, PermissionTimeout: time.Minute},
	}
	if !reflect.DeepEqual(*header.Config, want) {
		t.Fatalf("old header config:\n got  %s\n want %s", mustShow(*header.Config), mustShow(want))
	}
	// The last config record wins, as before.
	tr, err := st.Load("s1")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Config.Settings == nil || tr.Config.Settings.Permissions.DefaultMode != permission.ModePlan || tr.Config.Options != nil {
		t.Fatalf("loaded config = %s", mustShow(tr.Config))
	}
	// Written again, it is of the current version and reads back the same.
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"version":1`) || !reflect.DeepEqual(back, want) {
		t.Fatalf("rewritten: %s\nread back %s", data, mustShow(back))
	}
}

func mustShow(c Config) string {
	type plain Config // without MarshalJSON
	b, _ := json.Marshal(plain(c))
	return string(b)
}

func TestStoreTornLastLine(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create("s", Config{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := userMsg(model.TextBlock("one"))
	if err := st.Append("s", Record{Kind: KindMessage, Message: &m}); err != nil {
		t.Fatal(err)
	}
	st.Release("s")
	f, err := os.OpenFile(st.path("s"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"message","message":{"role":"assist`) // a crash mid-write
	f.Close()

	tr, err := st.Load("s")
	if err != nil {
		t.Fatalf("load with a torn last line: %v", err)
	}
	if len(tr.Messages) != 1 {
		t.Fatalf("messages = %+v", tr.Messages)
	}
	// Appending after the repair yields a valid file.
	m2 := model.Message{Role: model.RoleAssistant, Content: []model.Block{model.TextBlock("two")}}
	if err := st.Append("s", Record{Kind: KindMessage, Message: &m2}); err != nil {
		t.Fatal(err)
	}
	st.Release("s")
	tr, err = st.Load("s")
	if err != nil || len(tr.Messages) != 2 || tr.Messages[1].Text() != "two" {
		t.Fatalf("after repair: %v %+v", err, tr)
	}
}

func TestStoreRejectsCorruptMiddle(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	content := `{"type":"session","time":"2026-01-01T00:00:00Z","id":"s"}` + "\n" + "not json\n" + `{"type":"turn"}` + "\n"
	if err := os.WriteFile(st.path("s"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = st.Load("s")
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("load = %v, want an error naming line 2", err)
	}
}

func TestCheckID(t *testing.T) {
	for id, ok := range map[string]bool{
		"abc": true, "a.b-c_d": true, "0123": true,
		"": false, "../x": false, ".hidden": false, "a/b": false, "a b": false, strings.Repeat("a", 129): false,
	} {
		if err := CheckID(id); (err == nil) != ok {
			t.Errorf("CheckID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}

func TestStoreListAndRemove(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"a", "b"} {
		if err := st.Create(id, Config{}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(st.Dir(), "notes.txt"), nil, 0o600)
	// The in-process executor's saved outputs of a and b, beside their
	// transcripts.
	for _, id := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(st.Dir(), id), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(st.Dir(), id, "toolu_1.txt"), []byte("output"), 0o600)
	}
	ids, err := st.IDs()
	if err != nil || !reflect.DeepEqual(ids, []string{"a", "b"}) {
		t.Fatalf("list = %v, %v", ids, err)
	}
	if err := st.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(st.Dir(), "a")); err == nil {
		t.Error("a's saved outputs outlived its transcript")
	}
	if _, err := os.Stat(filepath.Join(st.Dir(), "b", "toolu_1.txt")); err != nil {
		t.Errorf("b's saved outputs went with a's: %v", err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	if d, _ := DefaultDir(); d != "/state/toolwire/sessions" {
		t.Fatalf("with XDG_STATE_HOME: %s", d)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := DefaultDir(); d != "/home/u/.local/state/toolwire/sessions" {
		t.Fatalf("without XDG_STATE_HOME: %s", d)
	}
}

func TestStoreLatestListRemove(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A transcript written before sessions recorded their directory stays
	// readable; it belongs to no directory.
	old := `{"type":"session","time":"2026-01-02T03:04:05Z","id":"old","config":{"model":"claude-sonnet-4-5"}}
{"type":"message","time":"2026-01-02T03:04:06Z","message":{"role":"user","content":[{"type":"text","text":"from before"}]}}
`
	if err := os.WriteFile(filepath.Join(st.Dir(), "old.jsonl"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(st.Dir(), "old.jsonl"), at.Add(-time.Hour), at.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ id, dir string }{{"p1", "/src/p"}, {"q1", "/src/q"}, {"p2", "/src/p"}} {
		if err := st.Create(c.id, Config{Directory: c.dir, Model: "m"}, at); err != nil {
			t.Fatal(err)
		}
		st.Release(c.id)
		// Updated times by file time: p1 is the newest in /src/p.
		mt := at.Add(time.Duration(i) * time.Minute)
		if c.id == "p1" {
			mt = at.Add(time.Hour)
		}
		if err := os.Chtimes(st.path(c.id), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := st.Latest("/src/p"); err != nil || id != "p1" {
		t.Fatalf("Latest(/src/p) = %q, %v; want p1", id, err)
	}
	if _, err := st.Latest("/src/none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest of a directory without sessions: %v", err)
	}
	list, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if !reflect.DeepEqual(ids, []string{"p1", "p2", "q1", "old"}) {
		t.Fatalf("List order = %v", ids)
	}
	if o := list[3]; o.Directory != "" || o.Model != "claude-sonnet-4-5" || o.Prompt != "from before" || o.Messages != 1 {
		t.Fatalf("old transcript = %+v", o)
	}
	if err := st.Remove("p1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove("p1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Remove: %v", err)
	}
	if id, err := st.Latest("/src/p"); err != nil || id != "p2" {
		t.Fatalf("Latest after Remove = %q, %v", id, err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
