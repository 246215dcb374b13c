package permission

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The workspace of the tests. Decide does no I/O, so it need not exist.
const ws = "/ws"

const home = "/home/u"

func bashInput(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

func pathInput(field, p string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{field: p})
	return b
}

// readOnlyTools are the tools whose Spec says ReadOnly.
var readOnlyTools = map[string]bool{"Read": true, "Glob": true, "Grep": true, "TaskOutput": true}

func request(tool string, input json.RawMessage) Request {
	return Request{Tool: tool, Input: input, Cwd: ws, Workspace: ws, ReadOnly: readOnlyTools[tool]}
}

func mustCompile(t testing.TB, operator, session Rules) *Policy {
	t.Helper()
	p, err := compile(operator, session, home)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBashDenyEvasion tries to get past Bash(rm:*) in bypassPermissions
// mode, where anything not denied or asked about runs: a deny must stay a
// deny, and what cannot be read must be asked about, never allowed.
func TestBashDenyEvasion(t *testing.T) {
	p := mustCompile(t, Rules{}, Rules{Deny: []string{"Bash(rm:*)"}, Mode: ModeBypass})
	tests := map[string]Behavior{
		`rm -rf x`:                            Deny,
		`rm`:                                  Deny,
		`r''m -rf x`:                          Deny,
		`"rm" x`:                              Deny,
		`'r'"m" x`:                            Deny,
		`\rm x`:                               Deny,
		"r\\\nm x":                            Deny,
		`$'\x72m' x`:                          Deny,
		`/bin/rm x`:                           Deny,
		`../../bin/rm x`:                      Deny,
		`bash -c 'rm -rf /'`:                  Deny,
		`sh -c "ls; rm x"`:                    Deny,
		`bash -c "bash -c 'rm x'"`:            Deny,
		"bash <<'E'\nrm -rf /\nE":             Deny,
		`bash <<< 'rm x'`:                     Deny,
		`eval "rm x"`:                         Deny,
		`eval r''m x`:                         Deny,
		`env rm x`:                            Deny,
		`env A=b rm x`:                        Deny,
		`env -i PATH=/bin rm x`:               Deny,
		`echo x | xargs rm`:                   Deny,
		`xargs -0 -I{} rm {}`:                 Deny,
		`command rm x`:                        Deny,
		`builtin command exec rm x`:           Deny,
		`sudo -u root rm x`:                   Deny,
		`doas rm x`:                           Deny,
		`timeout 5 rm x`:                      Deny,
		`nice -n 5 nohup stdbuf -oL rm x`:     Deny,
		`time rm x`:                           Deny,
		`busybox rm x`:                        Deny,
		`watch -n 1 rm x`:                     Deny,
		`find . -name x -exec rm {} +`:        Deny,
		`find . -execdir sh -c 'rm $0' {} \;`: Deny,
		`ls; rm x`:                            Deny,
		`ls && rm x`:                          Deny,
		`false || rm x`:                       Deny,
		`ls | rm x`:                           Deny,
		"ls\nrm x":                            Deny,
		`(rm x)`:                              Deny,
		`{ rm x; }`:                           Deny,
		"echo `rm x`":                         Deny,
		`echo $(rm x)`:                        Deny,
		`cat <(rm x)`:                         Deny,
		`ls > >(rm x)`:                        Deny,
		"cat <<E\n$(rm x)\nE":                 Deny,
		`if true; then rm x; fi`:              Deny,
		`for f in a; do rm $f; done`:          Deny,
		`f() { rm x; }; f`:                    Deny,
		`git status; rm x`:                    Deny,
		// Hidden from the text: asked about, never allowed.
		`$(echo rm) x`:        Ask,
		"`echo rm` x":         Ask,
		`x=rm; $x y`:          Ask,
		`r{m,} x`:             Ask,
		`r? x`:                Ask,
		`eval "$cmd"`:         Ask,
		`sh -c "$cmd"`:        Ask,
		`echo rm x | sh`:      Ask,
		`bash < script`:       Ask,
		`strace -f rm x`:      Ask,
		`unknownwrapper rm x`: Ask,
		`taskset 1 /bin/rm x`: Ask,
		`env -S 'rm x'`:       Ask,
		`timeout $t rm x`:     Ask,
		`bash -c 'rm "x'`:     Ask,
		"echo \"unterminated": Ask, // does not parse
		// Not rm at all.
		`rmdir x`:      Allow,
		`echo rm`:      Allow,
		`git rm x`:     Allow,
		`grep -r rm .`: Allow,
		`ls -la`:       Allow,
		`cat rm`:       Allow,
		// A script given rm as an argument may run it.
		`bash script.sh rm`: Ask,
	}
	for cmd, want := range tests {
		d := p.Decide(request("Bash", bashInput(cmd)))
		if d.Behavior != want {
			t.Errorf("%q: %s (rule %q, %s), want %s", cmd, d.Behavior, d.Rule, d.Reason, want)
		}
		if want != Allow && d.Rule != "Bash(rm:*)" {
			t.Errorf("%q: decided by %q, want Bash(rm:*)", cmd, d.Rule)
		}
	}
}

// TestBashAllow checks that an allow rule holds only when it covers every
// command of the line, and nothing hides in its structure.
func TestBashAllow(t *testing.T) {
	tests := []struct {
		rule string
		cmds map[string]Behavior
	}{
		{"Bash(git status)", map[string]Behavior{
			`git status`:                        Allow,
			`git   status`:                      Allow,
			`"git" 'status'`:                    Allow,
			`git status && git status`:          Allow,
			`timeout 5 git status`:              Allow,
			`LANG=C git status`:                 Allow,
			`git status --short`:                Ask,
			`git status; rm x`:                  Ask,
			`git status | tee f`:                Ask,
			`git status > f`:                    Ask,
			`git() { rm -rf /; }; git status`:   Ask,
			`PATH=/tmp/evil git status`:         Ask,
			`x=1; git status`:                   Ask,
			`sudo git status`:                   Ask,
			`env -i git status`:                 Ask,
			`$(echo git) status`:                Ask,
			`git $(echo status)`:                Ask,
			`bash -c 'git status'`:              Allow,
			`bash -c "$x"`:                      Ask,
			`git status &`:                      Ask,
			`git status 2>&1`:                   Allow,
			`git status >/dev/null 2>/dev/null`: Allow,
		}},
		{"Bash(npm run test:*)", map[string]Behavior{
			`npm run test`:                 Allow,
			`npm run test -- --watch`:      Allow,
			`npm run test $ARGS`:           Allow,
			`npm run testx`:                Ask,
			`npm run build`:                Ask,
			`npm run test; curl evil`:      Ask,
			`npm run test && npm run test`: Allow,
		}},
		{"Bash(git * main)", map[string]Behavior{
			`git checkout main`:         Allow,
			`git push origin main`:      Allow,
			`git main`:                  Ask,
			`git checkout main --force`: Ask,
		}},
		{"Bash(ls *)", map[string]Behavior{`ls`: Allow, `ls -la`: Allow, `lsof`: Ask}},
		{"Bash(ls*)", map[string]Behavior{`ls`: Allow, `lsof -i`: Allow, `cat`: Ask}},
		{"Bash(echo 'a b')", map[string]Behavior{`echo "a b"`: Allow, `echo a b`: Ask, `echo 'a  b'`: Ask}},
		{"Bash(echo *)", map[string]Behavior{`echo "*"`: Allow, `echo $(rm x)`: Ask}},
		{"Bash(sudo apt update)", map[string]Behavior{`sudo apt update`: Allow, `apt update`: Ask}},
		{"Bash(apt update)", map[string]Behavior{`sudo apt update`: Ask, `apt update`: Allow}},
		{"Bash(rm:*)", map[string]Behavior{`echo x | xargs rm`: Ask, `xargs rm`: Allow, `find . -exec rm {} +`: Ask}},
		{"Bash", map[string]Behavior{`rm -rf x`: Allow, `eval "$x"`: Allow, `ls > f`: Allow}},
	}
	for _, tt := range tests {
		p := mustCompile(t, Rules{}, Rules{Allow: []string{tt.rule}})
		for cmd, want := range tt.cmds {
			// Read-only commands are allowed by the default mode anyway:
			// what counts here is whether the rule allowed.
			d := p.Decide(request("Bash", bashInput(cmd)))
			byRule := d.Behavior == Allow && d.Rule == tt.rule
			if byRule != (want == Allow) {
				t.Errorf("%s, %q: %s by %q (%s), want allowed by the rule: %v", tt.rule, cmd, d.Behavior, d.Rule, d.Reason, want == Allow)
			}
		}
	}
}

func TestBashAllowSeveralRules(t *testing.T) {
	p := mustCompile(t, Rules{Allow: []string{"Bash(make:*)"}}, Rules{Allow: []string{"Bash(npm test)", "Bash(npm run lint)"}})
	d := p.Decide(request("Bash", bashInput("npm test && make && npm run lint && npm test")))
	if d.Behavior != Allow || d.Rule != "Bash(npm test), Bash(make:*), Bash(npm run lint)" || d.Origin != OriginSession {
		t.Fatalf("got %+v", d)
	}
}

func TestModes(t *testing.T) {
	edit := func(p string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"file_path": p, "old_string": "a", "new_string": "b"})
		return b
	}
	tests := []struct {
		name     string
		mode     Mode
		allow    []string
		tool     string
		input    json.RawMessage
		want     Behavior
		rule     string
		suggests string
	}{
		{"default read", ModeDefault, nil, "Read", pathInput("file_path", "/ws/a.go"), Allow, "mode:default", ""},
		{"default relative read", ModeDefault, nil, "Read", pathInput("file_path", "a.go"), Allow, "mode:default", ""},
		{"default read outside", ModeDefault, nil, "Read", pathInput("file_path", "/etc/hosts"), Ask, "mode:default", "Read(//etc/**)"},
		{"default grep", ModeDefault, nil, "Grep", pathInput("pattern", "x"), Allow, "mode:default", ""},
		{"default task output", ModeDefault, nil, "TaskOutput", pathInput("task_id", "b1"), Allow, "mode:default", ""},
		{"default read-only bash", ModeDefault, nil, "Bash", bashInput("ls -la | grep x"), Allow, "mode:default", ""},
		{"default writing bash", ModeDefault, nil, "Bash", bashInput("rm -rf build"), Ask, "mode:default", "Bash(rm:*)"},
		{"default git push", ModeDefault, nil, "Bash", bashInput("git push origin main"), Ask, "mode:default", "Bash(git push:*)"},
		{"default second command", ModeDefault, []string{"Bash(make:*)"}, "Bash", bashInput("make && npm test"), Ask, "mode:default", "Bash(npm test:*)"},
		{"default redirect", ModeDefault, nil, "Bash", bashInput("ls > f"), Ask, "mode:default", ""},
		{"default dynamic", ModeDefault, nil, "Bash", bashInput("$CMD x"), Ask, "mode:default", ""},
		{"default edit", ModeDefault, nil, "Edit", edit("/ws/src/a.go"), Ask, "mode:default", "Edit(/src/**)"},
		{"default edit at root", ModeDefault, nil, "Edit", edit("/ws/a.go"), Ask, "mode:default", "Edit(/**)"},
		{"default write outside", ModeDefault, nil, "Write", pathInput("file_path", "/tmp/x/a"), Ask, "mode:default", "Edit(//tmp/x/**)"},
		{"default other tool", ModeDefault, nil, "TaskStop", pathInput("task_id", "b1"), Ask, "mode:default", "TaskStop"},
		{"acceptEdits edit", ModeAcceptEdits, nil, "Edit", edit("/ws/src/a.go"), Allow, "mode:acceptEdits", ""},
		{"acceptEdits write", ModeAcceptEdits, nil, "Write", pathInput("file_path", "new/b.txt"), Allow, "mode:acceptEdits", ""},
		{"acceptEdits edit outside", ModeAcceptEdits, nil, "Edit", edit("/ws/../etc/passwd"), Ask, "mode:acceptEdits", "Edit(//etc/**)"},
		{"acceptEdits bash", ModeAcceptEdits, nil, "Bash", bashInput("mkdir d"), Ask, "mode:acceptEdits", "Bash(mkdir:*)"},
		{"plan read", ModePlan, nil, "Read", pathInput("file_path", "/ws/a"), Allow, "mode:plan", ""},
		{"plan read-only bash", ModePlan, nil, "Bash", bashInput("git log | head"), Allow, "mode:plan", ""},
		{"plan edit", ModePlan, nil, "Edit", edit("/ws/a"), Deny, "mode:plan", ""},
		{"plan edit allowed by rule", ModePlan, []string{"Edit"}, "Edit", edit("/ws/a"), Deny, "mode:plan", ""},
		{"plan bash", ModePlan, []string{"Bash(rm:*)"}, "Bash", bashInput("rm x"), Deny, "mode:plan", ""},
		{"bypass edit outside", ModeBypass, nil, "Edit", edit("/etc/passwd"), Allow, "mode:bypassPermissions", ""},
		{"bypass bash", ModeBypass, nil, "Bash", bashInput("eval \"$x\""), Allow, "mode:bypassPermissions", ""},
		{"allow rule wins over mode", ModeDefault, []string{"Edit(/src/**)"}, "Edit", edit("/ws/src/a.go"), Allow, "Edit(/src/**)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Rules{}, Rules{Mode: tt.mode, Allow: tt.allow})
			d := p.Decide(request(tt.tool, tt.input))
			if d.Behavior != tt.want || d.Rule != tt.rule || d.Suggestion != tt.suggests {
				t.Fatalf("got %s by %q suggesting %q (%s); want %s by %q suggesting %q",
					d.Behavior, d.Rule, d.Suggestion, d.Reason, tt.want, tt.rule, tt.suggests)
			}
			if d.Behavior != Allow && d.Reason == "" {
				t.Error("no reason given")
			}
			if tt.mode == ModePlan && d.Behavior == Deny && !strings.Contains(d.Reason, "Plan mode is on") {
				t.Errorf("plan-mode denial does not say so: %q", d.Reason)
			}
			if d.Suggestion == "" {
				return
			}
			// Allow always must then allow the same call.
			p2, err := p.WithAllow(d.Suggestion)
			if err != nil {
				t.Fatalf("suggestion %q: %v", d.Suggestion, err)
			}
			if d2 := p2.Decide(request(tt.tool, tt.input)); d2.Behavior != Allow || !strings.Contains(d2.Rule, d.Suggestion) {
				t.Errorf("after allowing %q: %s by %q", d.Suggestion, d2.Behavior, d2.Rule)
			}
			if d3 := p.Decide(request(tt.tool, tt.input)); d3 != d {
				t.Error("WithAllow changed the original policy")
			}
		})
	}
}

func TestPathRules(t *testing.T) {
	tests := []struct {
		rule  string
		tool  string
		field string
		path  string
		cwd   string
		want  bool
	}{
		{"Read(./secrets/**)", "Read", "file_path", "/ws/secrets/a", "", true},
		{"Read(./secrets/**)", "Read", "file_path", "secrets/a", "", true},
		{"Read(./secrets/**)", "Read", "file_path", "../secrets/a", "/ws/sub", true},
		{"Read(./secrets/**)", "Read", "file_path", "/ws/sub/../secrets/deep/b", "", true},
		{"Read(./secrets/**)", "Read", "file_path", "/ws/secretsX", "", false},
		{"Read(./secrets/**)", "Read", "file_path", "/ws/sub/secrets/a", "", false},
		{"Read(./secrets/**)", "Grep", "path", "/ws/secrets", "", true},
		{"Read(./secrets/**)", "Glob", "path", "secrets/x", "", true},
		{"Read(./secrets)", "Read", "file_path", "/ws/secrets/a/b", "", true},
		{"Read(secrets/)", "Read", "file_path", "/ws/secrets/a", "", true},
		{"Read(*.env)", "Read", "file_path", "/ws/.env", "", true},
		{"Read(*.env)", "Read", "file_path", "/ws/a/b/prod.env", "", true},
		{"Read(*.env)", "Read", "file_path", "/ws/a/env", "", false},
		{"Read(*.env)", "Read", "file_path", "/other/x.env", "", false},
		{"Read(.env)", "Read", "file_path", "/ws/deep/.env", "", true},
		{"Edit(/docs/**)", "Write", "file_path", "/ws/docs/a.md", "", true},
		{"Edit(/docs/**)", "NotebookEdit", "notebook_path", "/ws/docs/n.ipynb", "", true},
		{"Edit(/docs/**)", "Edit", "file_path", "/ws/src/docs/a.md", "", false},
		{"Edit(/docs/**)", "Read", "file_path", "/ws/docs/a.md", "", false},
		{"Edit(src/**/*.ts)", "Edit", "file_path", "/ws/src/a/b/c.ts", "", true},
		{"Edit(src/**/*.ts)", "Edit", "file_path", "/ws/src/c.js", "", false},
		{"Write(/x/*)", "Edit", "file_path", "/ws/x/a", "", false},
		{"Write(/x/*)", "Write", "file_path", "/ws/x/a", "", true},
		{"Read(//etc/**)", "Read", "file_path", "/etc/passwd", "", true},
		{"Read(//etc/**)", "Read", "file_path", "/ws/etc/passwd", "", false},
		{"Read(~/.ssh/**)", "Read", "file_path", "/home/u/.ssh/id_rsa", "", true},
		{"Read(~/.ssh/**)", "Read", "file_path", "/ws/.ssh/id_rsa", "", false},
		// "~" in the input is the home directory, as the tools take it.
		{"Read(~/.ssh/**)", "Read", "file_path", "~/.ssh/id_rsa", "", true},
		{"Read(~/.ssh/**)", "Grep", "path", "~/.ssh", "", true},
		{"Edit(~/.bashrc)", "NotebookEdit", "notebook_path", "~/.bashrc", "", true},
		{"Read(~/.ssh/**)", "Read", "file_path", "~other/.ssh/id_rsa", "", false},
		{"Read(./~/x)", "Read", "file_path", "./~/x", "", true},
		{"Edit(**/*.go)", "Edit", "file_path", "/ws/../other/x.go", "", false},
		{"Edit(**/*.go)", "Edit", "file_path", "/ws/a/x.go", "", true},
		{"Edit(../shared/**)", "Edit", "file_path", "/shared/x", "", true},
		{`Read(/we\*ird/**)`, "Read", "file_path", "/ws/we*ird/a", "", true},
		{`Read(/we\*ird/**)`, "Read", "file_path", "/ws/weXird/a", "", false},
	}
	for _, tt := range tests {
		p := mustCompile(t, Rules{}, Rules{Deny: []string{tt.rule}, Mode: ModeBypass})
		req := request(tt.tool, pathInput(tt.field, tt.path))
		if tt.cwd != "" {
			req.Cwd = tt.cwd
		}
		d := p.Decide(req)
		if got := d.Behavior == Deny; got != tt.want {
			t.Errorf("%s on %s %s: denied %v, want %v (%s)", tt.rule, tt.tool, tt.path, got, tt.want, d.Reason)
		}
	}
}

func TestOtherRules(t *testing.T) {
	tests := []struct {
		deny  string
		tool  string
		input json.RawMessage
		want  Behavior
	}{
		{"WebFetch(domain:evil.com)", "WebFetch", pathInput("url", "https://evil.com/x"), Deny},
		{"WebFetch(domain:evil.com)", "WebFetch", pathInput("url", "https://EVIL.com./x"), Deny},
		{"WebFetch(domain:evil.com)", "WebFetch", pathInput("url", "https://a.evil.com/x"), Deny},
		{"WebFetch(domain:evil.com)", "WebFetch", pathInput("url", "https://notevil.com/x"), Allow},
		{"WebFetch(domain:*.evil.com)", "WebFetch", pathInput("url", "https://evil.com/x"), Allow},
		{"WebFetch(domain:*.evil.com)", "WebFetch", pathInput("url", "https://a.evil.com/x"), Deny},
		{"WebFetch(domain:evil.com)", "WebFetch", pathInput("url", "not a url"), Ask},
		{"WebFetch", "WebFetch", pathInput("url", "https://x.org"), Deny},
		{"Task(secret)", "Task", pathInput("prompt", "x"), Ask},
		{"Task(secret)", "Read", pathInput("file_path", "/ws/x"), Allow},
		{"mcp__github", "mcp__github__create_issue", nil, Deny},
		{"mcp__github__*", "mcp__github__create_issue", nil, Deny},
		{"mcp__github", "mcp__githubx__create_issue", nil, Allow},
		{"mcp__github__create_issue", "mcp__github__create_issue", nil, Deny},
		{"BashOutput", "TaskOutput", nil, Deny},
		{"TaskStop", "KillShell", nil, Deny},
		{"Read(./x)", "Read", json.RawMessage(`{}`), Ask},
	}
	for _, tt := range tests {
		p := mustCompile(t, Rules{}, Rules{Deny: []string{tt.deny}, Mode: ModeBypass})
		if d := p.Decide(request(tt.tool, tt.input)); d.Behavior != tt.want {
			t.Errorf("%s on %s %s: %s (%s), want %s", tt.deny, tt.tool, tt.input, d.Behavior, d.Reason, tt.want)
		}
	}
	// A specifier this package cannot read never allows.
	p := mustCompile(t, Rules{}, Rules{Allow: []string{"Task(x)", "mcp__srv"}})
	if d := p.Decide(request("Task", nil)); d.Behavior != Ask {
		t.Errorf("Task(x) allowed Task: %+v", d)
	}
	if d := p.Decide(request("mcp__srv__do", nil)); d.Behavior != Allow {
		t.Errorf("mcp__srv did not allow mcp__srv__do: %+v", d)
	}
}

func TestOperatorRulesWin(t *testing.T) {
	operator := Rules{Deny: []string{"Bash(git push:*)"}, Ask: []string{"Edit(/infra/**)"}, DisableBypass: true}

	p := mustCompile(t, operator, Rules{Allow: []string{"Bash(git push:*)", "Bash", "Edit"}, Mode: ModeAcceptEdits})
	d := p.Decide(request("Bash", bashInput("git push origin main")))
	if d.Behavior != Deny || d.Origin != OriginOperator || !strings.Contains(d.Reason, "operator") {
		t.Errorf("operator deny loosened: %+v", d)
	}
	if !strings.Contains(d.Reason, "Bash(git push:*)") || !strings.Contains(d.Reason, "git push origin main") {
		t.Errorf("deny reason lacks the rule or the command: %q", d.Reason)
	}
	d = p.Decide(request("Edit", pathInput("file_path", "/ws/infra/main.tf")))
	if d.Behavior != Ask || d.Origin != OriginOperator || d.Rule != "Edit(/infra/**)" {
		t.Errorf("operator ask loosened: %+v", d)
	}
	if d := p.Decide(request("Edit", pathInput("file_path", "/ws/src/a"))); d.Behavior != Allow || d.Origin != OriginSession {
		t.Errorf("session allow ignored: %+v", d)
	}
	p2, err := p.WithAllow("Bash(git push origin main)")
	if err != nil {
		t.Fatal(err)
	}
	if d := p2.Decide(request("Bash", bashInput("git push origin main"))); d.Behavior != Deny {
		t.Errorf("allow always loosened an operator deny: %+v", d)
	}

	_, err = compile(operator, Rules{Mode: ModeBypass}, home)
	if !errors.Is(err, ErrBypassDisabled) {
		t.Errorf("bypass with DisableBypass: %v", err)
	}
	if _, err := compile(Rules{Mode: ModeBypass, DisableBypass: true}, Rules{}, home); !errors.Is(err, ErrBypassDisabled) {
		t.Errorf("operator bypass with DisableBypass: %v", err)
	}
	// The session can still deny more, and tighten the mode.
	p = mustCompile(t, Rules{Allow: []string{"Bash(make:*)"}, Mode: ModeBypass}, Rules{Deny: []string{"Bash(make deploy)"}, Mode: ModePlan})
	if p.Mode() != ModePlan {
		t.Errorf("mode %s, want plan", p.Mode())
	}
	p = mustCompile(t, Rules{Allow: []string{"Bash(make:*)"}, Mode: ModeBypass}, Rules{Deny: []string{"Bash(make deploy)"}})
	if d := p.Decide(request("Bash", bashInput("make deploy"))); d.Behavior != Deny || d.Origin != OriginSession {
		t.Errorf("session deny ignored: %+v", d)
	}
	if d := p.Decide(request("Write", pathInput("file_path", "/ws/x"))); d.Behavior != Allow || d.Rule != "mode:bypassPermissions" {
		t.Errorf("operator default mode not used: %+v", d)
	}
}

func TestAskRules(t *testing.T) {
	p := mustCompile(t, Rules{}, Rules{Ask: []string{"Bash(git push:*)"}, Allow: []string{"Bash(git:*)"}})
	d := p.Decide(request("Bash", bashInput("git add . && git push")))
	// No allow rule can get past an ask rule, so nothing is suggested.
	if d.Behavior != Ask || d.Rule != "Bash(git push:*)" || d.Suggestion != "" {
		t.Errorf("got %+v", d)
	}
	if !strings.Contains(d.Reason, "git push") {
		t.Errorf("reason %q does not name the command", d.Reason)
	}
	if d := p.Decide(request("Bash", bashInput("git add . && git commit -m x"))); d.Behavior != Allow {
		t.Errorf("got %+v", d)
	}
}

func TestParseRule(t *testing.T) {
	good := map[string][2]string{
		"Bash":                           {"Bash", ""},
		"Bash(*)":                        {"Bash", ""},
		" Edit ":                         {"Edit", ""},
		"Bash(npm run test:*)":           {"Bash", "npm run test:*"},
		"Bash(echo '(x)')":               {"Bash", "echo '(x)'"},
		"Read(./src/**)":                 {"Read", "./src/**"},
		"WebFetch(domain:example.com)":   {"WebFetch", "domain:example.com"},
		"mcp__server__tool":              {"mcp__server__tool", ""},
		"KillBash":                       {"TaskStop", ""},
		"Task(anything at all (really))": {"Task", "anything at all (really)"},
	}
	for text, want := range good {
		r, err := ParseRule(text)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", text, err)
			continue
		}
		if r.Tool != want[0] || r.Specifier != want[1] || r.String() != text {
			t.Errorf("ParseRule(%q) = %q %q", text, r.Tool, r.Specifier)
		}
	}
	bad := []string{"", "Bash(", "Bash(npm", "(x)", "Bash()", "Bash( )", "Ba sh", "Bash)(", "Bash)",
		"Bash(a; b)", "Bash(a && b)", "Bash(ls > f)", "Bash($x)", "Bash(echo $(id))", "Bash(echo \"x)",
		"WebFetch(domain:)", "Read([)", "9lives", "Bash x"}
	for _, text := range bad {
		if _, err := ParseRule(text); err == nil {
			t.Errorf("ParseRule(%q) succeeded", text)
		}
	}
	if _, err := compile(Rules{}, Rules{Deny: []string{"Read(~/.aws/**)"}}, ""); err == nil {
		t.Error("~ rule compiled without a home directory")
	}
	_, err := Compile(Rules{}, Rules{Deny: []string{"Bash(ok)", "Bash(bad"}})
	if err == nil || !strings.Contains(err.Error(), `"Bash(bad"`) {
		t.Errorf("error does not name the rule: %v", err)
	}
	if _, err := Compile(Rules{}, Rules{Mode: "yolo"}); err == nil {
		t.Error("unknown mode accepted")
	}
}

func TestGlobMatch(t *testing.T) {
	const U, W = symUnknown, symWildcard
	tests := []struct {
		pattern, subject []rune
		want             match
	}{
		{[]rune("rm x"), []rune("rm x"), fullMatch},
		{[]rune("rm x"), []rune("rm y"), noMatch},
		{[]rune("rm "), []rune("rm"), noMatch},
		{append([]rune("rm "), W), []rune("rm -rf /"), fullMatch},
		{append([]rune("rm "), W), []rune{'r', 'm', ' ', U}, fullMatch},
		{[]rune("rm x"), []rune{'r', 'm', ' ', U}, maybeMatch},
		{[]rune("rm x"), []rune{U, ' ', 'x'}, maybeMatch},
		{[]rune("rm x"), []rune{U}, maybeMatch},
		{[]rune("rm x"), []rune{U, 'y'}, noMatch},
		{[]rune("rm x"), []rune{'r', 'm', ' ', 'x', U}, maybeMatch},
		{[]rune{W}, []rune{}, fullMatch},
		{[]rune{}, []rune{U}, maybeMatch},
		{[]rune{'a', W, 'b'}, []rune("a b c b"), fullMatch},
		{[]rune{'a', symWordSpace, 'b'}, []rune("a b"), noMatch},
	}
	for _, tt := range tests {
		if got := matchRunes(tt.pattern, tt.subject); got != tt.want {
			t.Errorf("match(%q, %q) = %d, want %d", tt.pattern, tt.subject, got, tt.want)
		}
	}
}

func TestHugeCommandIsNotAllowed(t *testing.T) {
	p := mustCompile(t, Rules{}, Rules{Allow: []string{"Bash(echo *)"}, Deny: []string{"Bash(rm *)"}})
	long := "echo " + strings.Repeat("a ", 3000)
	if d := p.Decide(request("Bash", bashInput(long))); d.Behavior != Allow || d.Rule != "Bash(echo *)" {
		t.Errorf("long echo: %s by %s", d.Behavior, d.Rule)
	}
	huge := "echo " + strings.Repeat("ab", 400_000)
	if d := p.Decide(request("Bash", bashInput(huge))); d.Rule == "Bash(echo *)" {
		t.Errorf("a command too large to match was allowed by the rule")
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"Bash", "Bash(npm run test:*)", "Read(./src/**)", "Edit(//x/**)", "Read(~/a)",
		"WebFetch(domain:a.b)", "Bash(git * main)", "Bash(echo 'a b' \"c\")", "mcp__s__*", "Bash(a;b)", "Read([)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := parseRule(text, home)
		if err != nil {
			return
		}
		if r.Text != text || r.Tool == "" {
			t.Fatalf("%q parsed to %+v", text, r)
		}
		again, err := parseRule(r.Text, home)
		if err != nil || again.Tool != r.Tool || again.Specifier != r.Specifier || again.kind != r.kind {
			t.Fatalf("%q does not parse the same twice: %+v vs %+v (%v)", text, r, again, err)
		}
		// A parsed rule compiles into a policy that can decide.
		p, err := compile(Rules{}, Rules{Deny: []string{text}, Allow: []string{text}}, home)
		if err != nil {
			t.Fatalf("%q parses but does not compile: %v", text, err)
		}
		p.Decide(request(r.Tool, bashInput("ls")))
	})
}

func FuzzBashMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"rm:*", "rm -rf x"}, {"git status", "git status; rm x"}, {"npm run *", "npm run test"},
		{"git * main", "git checkout main"}, {"rm -rf *", `bash -c 'rm -rf /'`}, {"ls*", "lsof"},
		{"echo 'a b'", `echo "a b"`}, {"curl:*", "echo x | xargs curl"}, {"rm:*", `$'\x72m' x`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, spec, command string) {
		rule := "Bash(" + spec + ")"
		if _, err := parseRule(rule, home); err != nil {
			return
		}
		req := request("Bash", bashInput(command))
		allowP := mustCompile(t, Rules{}, Rules{Allow: []string{rule}})
		denyP := mustCompile(t, Rules{}, Rules{Deny: []string{rule}, Mode: ModeBypass})
		allowed := allowP.Decide(req)
		denied := denyP.Decide(req)
		// What a rule allows outright, the same rule as a deny rule denies.
		if allowed.Behavior == Allow && allowed.Rule == rule && denied.Behavior != Deny {
			t.Fatalf("rule %s allows %q but as a deny rule gives %s", rule, command, denied.Behavior)
		}
		// Hiding the command in bash -c never turns a deny into an allow.
		wrapped := request("Bash", bashInput("bash -c '"+strings.ReplaceAll(command, "'", `'\''`)+"'"))
		if denied.Behavior == Deny && denyP.Decide(wrapped).Behavior == Allow {
			t.Fatalf("rule %s denies %q but allows it inside bash -c", rule, command)
		}
		// Allow always works: the suggested rule allows the same call.
		plain := mustCompile(t, Rules{}, Rules{})
		d := plain.Decide(req)
		if d.Suggestion != "" {
			p2, err := plain.WithAllow(d.Suggestion)
			if err != nil {
				t.Fatalf("suggestion %q for %q does not parse: %v", d.Suggestion, command, err)
			}
			if d2 := p2.Decide(req); d2.Behavior == Deny {
				t.Fatalf("suggestion %q for %q denies", d.Suggestion, command)
			}
		}
	})
}

func BenchmarkDecideBash(b *testing.B) {
	p := mustCompile(b, Rules{Deny: []string{"Bash(rm -rf:*)", "Bash(git push:*)"}},
		Rules{Allow: []string{"Bash(npm run test:*)", "Bash(go test:*)", "Bash(make:*)"}})
	req := request("Bash", bashInput(`go test ./... && npm run test -- --watch=false && make lint`))
	for b.Loop() {
		if d := p.Decide(req); d.Behavior != Allow {
			b.Fatal(d)
		}
	}
}

func BenchmarkDecideRead(b *testing.B) {
	p := mustCompile(b, Rules{Deny: []string{"Read(./.env)", "Read(~/.ssh/**)"}}, Rules{})
	req := request("Read", pathInput("file_path", "/ws/src/pkg/a.go"))
	for b.Loop() {
		if d := p.Decide(req); d.Behavior != Allow {
			b.Fatal(d)
		}
	}
}

// TestAddDirsCountAsWorkspace: the modes treat a path in an added directory
// (--add-dir) as in the workspace, and no other.
func TestAddDirsCountAsWorkspace(t *testing.T) {
	edit := func(p string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"file_path": p, "old_string": "a", "new_string": "b"})
		return b
	}
	cases := []struct {
		mode  Mode
		tool  string
		input json.RawMessage
		want  Behavior
	}{
		{ModeDefault, "Read", pathInput("file_path", "/extra/a.txt"), Allow},
		{ModeDefault, "Read", pathInput("file_path", "/extra-not/a.txt"), Ask},
		{ModeAcceptEdits, "Edit", edit("/extra/sub/a.go"), Allow},
		{ModeAcceptEdits, "Edit", edit("/elsewhere/a.go"), Ask},
		{ModeDefault, "Edit", edit("/extra/a.go"), Ask},
	}
	for _, c := range cases {
		p := mustCompile(t, Rules{}, Rules{Mode: c.mode})
		req := request(c.tool, c.input)
		req.AddDirs = []string{"/extra"}
		if d := p.Decide(req); d.Behavior != c.want {
			t.Errorf("%s %s %s: %s (%s), want %s", c.mode, c.tool, c.input, d.Behavior, d.Reason, c.want)
		}
	}
}

// The home directory of the input's "~" is the one the tool will use (the
// workspace's), which may not be the policy's; a path under it is outside
// the workspace like any other.
func TestHomeOfTheInput(t *testing.T) {
	p := mustCompile(t, Rules{}, Rules{Deny: []string{"Read(//srv/home/secret)"}})
	req := request("Read", pathInput("file_path", "~/secret"))
	req.Home = "/srv/home"
	if d := p.Decide(req); d.Behavior != Deny {
		t.Errorf("~/secret with home /srv/home: %s (%s), want deny", d.Behavior, d.Reason)
	}
	req = request("Read", pathInput("file_path", "~/notes.txt"))
	if d := p.Decide(req); d.Behavior != Ask || !strings.Contains(d.Reason, "/home/u/notes.txt, outside the workspace") {
		t.Errorf("~/notes.txt in default mode: %s (%s), want ask, outside the workspace", d.Behavior, d.Reason)
	}
}
