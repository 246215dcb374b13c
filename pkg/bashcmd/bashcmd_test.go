package bashcmd

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cmd describes an expected Command briefly: its words joined by spaces,
// and flags.
type cmd struct {
	words      string
	wrappers   string // space-separated
	privileged bool
	opaque     bool
	dynamic    bool // the program name is dynamic
}

func describe(c Command) cmd {
	return cmd{
		words:      c.String(),
		wrappers:   strings.Join(c.Wrappers, " "),
		privileged: c.Privileged,
		opaque:     c.Opaque,
		dynamic:    c.Dynamic(),
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		line string
		want []cmd
	}{
		{`ls -la`, []cmd{{words: "ls -la"}}},
		{`r''m -rf x`, []cmd{{words: "rm -rf x"}}},
		{`"rm" x`, []cmd{{words: "rm x"}}},
		{`\rm x`, []cmd{{words: "rm x"}}},
		{"r\\\nm x", []cmd{{words: "rm x"}}},
		{`$'\x72\155' x`, []cmd{{words: "rm x"}}},
		{`$'\u0072m' "a\"b" 'c d'`, []cmd{{words: `rm a"b c d`}}},
		{`$(echo rm) x`, []cmd{{words: "$(echo rm) x", dynamic: true}, {words: "echo rm"}}},
		{"`echo rm` x", []cmd{{words: "`echo rm` x", dynamic: true}, {words: "echo rm"}}},
		{`$x -rf /`, []cmd{{words: "$x -rf /", dynamic: true}}},
		{`r{m,} x`, []cmd{{words: "r{m,} x", dynamic: true}}},
		{`r* x`, []cmd{{words: "r* x", dynamic: true}}},
		{`~/bin/tool`, []cmd{{words: "~/bin/tool", dynamic: true}}},
		{"git status; rm x", []cmd{{words: "git status"}, {words: "rm x"}}},
		{"a && b || c | d", []cmd{{words: "a"}, {words: "b"}, {words: "c"}, {words: "d"}}},
		{"ls\nrm x", []cmd{{words: "ls"}, {words: "rm x"}}},
		{"(cd sub && rm x)", []cmd{{words: "cd sub"}, {words: "rm x"}}},
		{"{ rm x; }", []cmd{{words: "rm x"}}},
		{"if true; then rm x; fi", []cmd{{words: "true"}, {words: "rm x"}}},
		{"for f in *; do rm $f; done", []cmd{{words: "rm $f"}}},
		{`cat <(rm x) >(tee y)`, []cmd{{words: "cat <(rm x) >(tee y)"}, {words: "rm x"}, {words: "tee y"}}},
		{"cat <<E\n$(rm x)\nE", []cmd{{words: "cat"}, {words: "rm x"}}},
		{"f() { rm x; }; f", []cmd{{words: "rm x"}, {words: "f"}}},
		{"export A=1", []cmd{{words: "export A=1"}}},
		{`echo "$(rm x)"`, []cmd{{words: "echo $(rm x)"}, {words: "rm x"}}},
		{`x=$(rm y)`, []cmd{{words: "rm y"}}},
		// Wrappers.
		{`bash -c 'rm -rf /'`, []cmd{{words: "rm -rf /", wrappers: "bash"}}},
		{`sh -ec "git status; rm x"`, []cmd{{words: "git status", wrappers: "sh"}, {words: "rm x", wrappers: "sh"}}},
		{`bash -o pipefail -c 'rm x'`, []cmd{{words: "rm x", wrappers: "bash"}}},
		{`/bin/bash -c "bash -c 'rm x'"`, []cmd{{words: "rm x", wrappers: "bash bash"}}},
		{`sh -c "$cmd"`, []cmd{{words: "sh -c $cmd", opaque: true}}},
		{`bash script.sh`, []cmd{{words: "bash script.sh"}}},
		{"bash <<'E'\nrm -rf /\nE", []cmd{{words: "rm -rf /", wrappers: "bash"}}},
		{"sh <<E\nrm \\$HOME\nE", []cmd{{words: "rm $HOME", wrappers: "sh"}}},
		{"sh <<E\nrm $HOME\nE", []cmd{{words: "sh", opaque: true}}},
		{`bash <<< 'rm x'`, []cmd{{words: "rm x", wrappers: "bash"}}},
		{`echo rm x | bash`, []cmd{{words: "echo rm x"}, {words: "bash", opaque: true}}},
		{`bash < script.sh`, []cmd{{words: "bash", opaque: true}}},
		{`bash -c 'rm "x'`, []cmd{{words: `bash -c rm "x`, opaque: true}}},
		{`eval "rm x"`, []cmd{{words: "rm x", wrappers: "eval"}}},
		{`eval rm '$x'`, []cmd{{words: "rm $x", wrappers: "eval"}}},
		{`eval "$x"`, []cmd{{words: "eval $x", opaque: true}}},
		{`env A=b rm x`, []cmd{{words: "rm x", wrappers: "env", privileged: true}}},
		{`env LC_ALL=C sort f`, []cmd{{words: "sort f", wrappers: "env"}}},
		{`env -i rm x`, []cmd{{words: "rm x", wrappers: "env", privileged: true}}},
		{`env -S 'rm x'`, []cmd{{words: "env -S rm x", opaque: true}}},
		{`env`, []cmd{{words: "env"}}},
		{`PATH=/x ls`, []cmd{{words: "ls", privileged: true}}},
		{`LANG=C ls`, []cmd{{words: "ls"}}},
		{`echo x | xargs rm`, []cmd{{words: "echo x"}, {words: "rm {stdin}", wrappers: "xargs"}}},
		{`xargs -0 -n 1 -I{} rm -f {}`, []cmd{{words: "rm -f {} {stdin}", wrappers: "xargs"}}},
		{`xargs`, []cmd{{words: "echo {stdin}", wrappers: "xargs"}}},
		{`command rm x`, []cmd{{words: "rm x", wrappers: "command"}}},
		{`command -v rm`, []cmd{{words: "command -v rm"}}},
		{`builtin exec nohup rm x`, []cmd{{words: "rm x", wrappers: "builtin exec nohup"}}},
		{`timeout -s KILL 5 nice -n 3 rm x`, []cmd{{words: "rm x", wrappers: "timeout nice"}}},
		{`nice -5 stdbuf -oL rm x`, []cmd{{words: "rm x", wrappers: "nice stdbuf"}}},
		{`time rm x`, []cmd{{words: "rm x"}}},
		{`sudo -u root rm x`, []cmd{{words: "rm x", wrappers: "sudo", privileged: true}}},
		{`sudo -l`, []cmd{{words: "sudo -l", privileged: true}}},
		{`doas rm x`, []cmd{{words: "rm x", wrappers: "doas", privileged: true}}},
		{`su -c 'rm x' root`, []cmd{{words: "rm x", wrappers: "su", privileged: true}}},
		{`busybox rm x`, []cmd{{words: "rm x", wrappers: "busybox"}}},
		{`watch -n 1 'rm x'`, []cmd{{words: "rm x", wrappers: "watch"}}},
		{`timeout $t rm x`, []cmd{{words: "timeout $t rm x", opaque: true}}},
		{`find . -name '*.go' -exec rm {} + -o -execdir grep -l x {} \;`, []cmd{
			{words: "find . -name *.go -exec rm {} + -o -execdir grep -l x {} ;"},
			{words: "rm {}", wrappers: "find"},
			{words: "grep -l x {}", wrappers: "find"},
		}},
		{`find . -exec sh -c 'rm "$1"' _ {} \;`, []cmd{
			{words: "find . -exec sh -c rm \"$1\" _ {} ;"},
			{words: "rm $1", wrappers: "find sh"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			cmds, err := Commands(tt.line)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]cmd, len(cmds))
			for i, c := range cmds {
				got[i] = describe(c)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCommandFull(t *testing.T) {
	cmds, err := Commands(`FOO=1 timeout 5 bash -c 'rm x; ls'`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 2 {
		t.Fatalf("got %d commands", len(cmds))
	}
	for _, c := range cmds {
		if got, want := joinWords(c.Full), "FOO=1 timeout 5 bash -c rm x; ls"; got != want {
			t.Errorf("Full = %q, want %q", got, want)
		}
		if !c.Privileged {
			t.Errorf("%s: an assignment to FOO should make it privileged", c)
		}
	}
	if got := cmds[1].Full[5].Text; got != "rm x; ls" {
		t.Errorf("the script stays one word: %q", got)
	}
}

func TestWordParts(t *testing.T) {
	cmds, err := Commands(`rm -rf "$HOME"/x*.txt`)
	if err != nil {
		t.Fatal(err)
	}
	w := cmds[0].Words[2]
	want := []Part{{Text: "$HOME", Dynamic: true}, {Text: "/x"}, {Text: "*", Dynamic: true}, {Text: ".txt"}}
	if !w.Dynamic || !slices.Equal(w.Parts(), want) {
		t.Errorf("parts %+v, want %+v", w.Parts(), want)
	}
	if got := Lit("a b").Parts(); !slices.Equal(got, []Part{{Text: "a b"}}) {
		t.Errorf("Lit parts %+v", got)
	}
}

func TestCommandsParseError(t *testing.T) {
	for _, line := range []string{`echo "unterminated`, `if then`, `a &&`, `$(`} {
		if _, err := Commands(line); err == nil {
			t.Errorf("%q: no error", line)
		}
		if ReadOnly(line) {
			t.Errorf("%q: unparsable line is read-only", line)
		}
	}
}

func TestEffects(t *testing.T) {
	tests := map[string][]Effect{
		`ls -la`:                      nil,
		`ls 2>&1 >/dev/null <in`:      nil,
		"cat <<E\nx\nE":               nil,
		`echo x > f`:                  {EffectRedirect},
		`echo x >> f; y=1`:            {EffectRedirect, EffectVariable},
		`git() { rm -rf /; }; git st`: {EffectFunction},
		`export PATH=/x`:              {EffectVariable},
		`echo $((i++)) ${x:=1}`:       {EffectVariable},
		`sleep 9 &`:                   {EffectBackground},
		`bash -c 'ls > f'`:            {EffectRedirect},
		`x=1 ls`:                      nil, // an assignment to one command only
	}
	for line, want := range tests {
		s, err := Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Effects, want) {
			t.Errorf("%q: effects %v, want %v", line, s.Effects, want)
		}
	}
}

func TestReadOnly(t *testing.T) {
	readOnly := []string{
		`ls -la`, `cat a b | grep -n x | head -5`, `echo hi`, `sleep 5; echo done`, `sleep 5`,
		`wc -l *.go`, `find . -name '*.go' -type f`, `grep -r foo . 2>/dev/null`, `ls >/dev/null 2>&1`,
		`ls 2>&1 | tail`, `cat <<EOF
text
EOF`, `cat < input.txt`, `rg -n "x" src`, `git status`, `git -C sub log --oneline -5`,
		`git diff HEAD~1 -- a.go`, `git show HEAD:file`, `git branch`, `git branch -a -v`,
		`git branch --list 'feat*'`, `git tag -l 'v1*'`, `git tag`, `git config --get user.name`,
		`git remote -v`, `git stash list`, `git --no-pager log`, `echo $(git rev-parse HEAD)`,
		`timeout 5 cat x`, `find . -name x | xargs grep foo`, `bash -c 'ls; pwd'`, `LC_ALL=C sort f`,
		`sort -n -k 2 f`, `sed -n '1,10p' f`, `sed -n -e '/start/,/end/p' f`, `sed 's/a/b/g' f`,
		`sed -E 's|x|y|2;3d' f`, `sed --sandbox 'w out' f`, `jq '.a' f.json`, `diff -u a b`,
		`[ -f x ] && echo yes`, `[[ -d x ]] || echo no`, `test -e x`, `true`, `:`, `pwd`,
		`which go`, `command -v go`, `type ls`, `date +%s`, `stat -c %s f`, `readlink -f x`,
		`du -sh .`, `tree -L 2`, `uniq f`, `xxd f`, `file f`, `env`, `printenv HOME`,
		`for f in *.go; do wc -l "$f"; done`, `if [ -f x ]; then cat x; else echo none; fi`,
		`echo "${HOME:-/}"`, `echo $((1+2))`, `cat "$(ls | head -1)"`, `diff <(ls a) <(ls b)`,
		`! grep -q x f`, `time ls`, `ls | nice sort`, `echo {a,b}`, `printf '%s\n' x`,
	}
	for _, line := range readOnly {
		if !ReadOnly(line) {
			t.Errorf("ReadOnly(%q) = false, want true", line)
		}
	}
	writes := []string{
		`rm x`, `echo x > f`, `echo x >> f`, `ls > out.txt`, `ls &> out`, `ls >&out`, `ls >| f`,
		`cat <> f`, `mkdir d`, `touch f`, `cd sub`, `cd sub && ls`, `x=1`, `x=1; ls`, `export A=1`,
		`PATH=/tmp ls`, `FOO=bar ls`, `ls &`, `f() { ls; }`, `((x++))`, `let x=1`, `echo $((x=2))`,
		`echo ${x:=3}`, `coproc ls`, `nonexistent-cmd-xyz`, `exit 4`, `$cmd`, `$(echo ls)`,
		"`echo ls`", `/bin/ls`, `./ls`, `sudo ls`, `env A=b ls`, `env -i ls`, `eval "$x"`,
		`bash -c "$x"`, `echo ls | bash`, `bash script.sh`, `find . -delete`, `find . -exec rm {} \;`,
		`find . -execdir ls \;`, `find . -fprint out`, `find $x`, `sort -o out f`, `sort --output=out f`,
		`sort --out=o f`, `sort $flags f`, `uniq a b`, `xxd a b`, `xxd -r a`, `tree -o out`,
		`file -C -m x`, `date -s now`, `date --set=now`, `printf -v x hi`, `hostname newname`,
		`rg --pre cat x`, `rg --pre=sh x`, `git push`, `git commit -m x`, `git checkout main`,
		`git -c core.pager=sh log`, `git branch newbranch`, `git branch -D x`, `git tag v1`,
		`git tag -d v1`, `git config user.name x`, `git diff --output=f`, `git log --outp=f`,
		`git grep -O x`, `git stash`, `git stash pop`, `git remote add o u`, `git reflog expire`,
		`sed -i 's/a/b/' f`, `sed -n 'w out' f`, `sed 's/a/b/w out' f`, `sed 's/a/b/e' f`,
		`sed -f script f`, `sed '1e rm x' f`, `sed 'r other' f`, `tee f`, `curl http://x`,
		`awk '{print}' f`, `ls; rm x`, `ls && mkdir d`, `cat $(rm x)`, `cat <(rm x)`,
		`echo hi | tee f`, `timeout 5 rm x`, `xargs rm`, `ls | sh`, `command rm x`,
		`env -S 'ls'`, `watch ls`, `git`, `sed`, `command`, "cat <<E\n$(rm x)\nE",
		`exec 3>f`, `ls {fd}>/dev/null`, `ls 1>f`, `cat 0<>f`,
	}
	for _, line := range writes {
		if ReadOnly(line) {
			t.Errorf("ReadOnly(%q) = true, want false", line)
		}
	}
}

func TestRunsArguments(t *testing.T) {
	tests := map[string]bool{
		`cat x`: false, `rm -rf x`: false, `git status`: false, `git rm x`: false, `echo rm`: false,
		`grep rm .`: false, `strace rm x`: true, `parallel rm ::: a`: true, `unknown rm`: true,
		`git -c alias.x=!rm x`: true, `git rebase -x 'rm y'`: true, `find . -exec rm {} +`: true,
		`find . -name x`: false, `sort --compress-program=rm f`: true, `$x`: true,
	}
	for line, want := range tests {
		cmds, err := Commands(line)
		if err != nil {
			t.Fatal(err)
		}
		if got := cmds[0].RunsArguments(); got != want {
			t.Errorf("%q: RunsArguments = %v, want %v", line, got, want)
		}
	}
}

func TestSedScripts(t *testing.T) {
	safe := []string{"p", "1,10p", "$p", "/x/p", `\,x,p`, "1~2d", "/a/,+3p", "s/a/b/", "s/a/b/gI",
		"s|a\\|b|c|g", "y/abc/xyz/", "1d;3q", "/x/!d", "{p;p}", "=", "n;p", "2q 3"}
	unsafe := []string{"w f", "s/a/b/w f", "s/a/b/e", "e ls", "r f", "a text", "i\\", "1,3c x", "s/a/b",
		"s/a/b/x", "/unterminated", "b end", ": label", "# comment", "p x"}
	for _, s := range safe {
		if !sedScriptSafe(s) {
			t.Errorf("sedScriptSafe(%q) = false", s)
		}
	}
	for _, s := range unsafe {
		if sedScriptSafe(s) {
			t.Errorf("sedScriptSafe(%q) = true", s)
		}
	}
}

func TestDeepNesting(t *testing.T) {
	line := strings.Repeat("eval ", 30) + "rm x"
	cmds, err := Commands(line)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 1 || !cmds[0].Opaque {
		t.Fatalf("too deep nesting should end in one opaque command, got %+v", cmds)
	}
	if ReadOnly(strings.Repeat("eval ", 30) + "ls") {
		t.Error("too deep nesting is read-only")
	}
	if !ReadOnly(strings.Repeat("eval ", 3) + "ls") {
		t.Error("shallow eval of ls is not read-only")
	}
}

func FuzzCommands(f *testing.F) {
	for _, seed := range []string{`ls -la`, `r''m x`, `bash -c 'rm -rf /'`, "cat <<E\n$(rm x)\nE",
		`find . -exec rm {} +`, `env A=b sudo -u x timeout 5 xargs rm`, `eval "$x"`, `echo ${x:=1}`,
		`git -C d log --output=f`, `sed -n '1p;s/a/b/w f' x`, `$'\x72m' r{m,} ~/x`, `a=1 b=2`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cmds, err := Commands(line)
		ro := ReadOnly(line)
		if err != nil {
			if ro {
				t.Fatalf("unparsable %q is read-only", line)
			}
			return
		}
		for _, c := range cmds {
			if len(c.Words) == 0 && !c.Opaque {
				t.Fatalf("%q: empty command", line)
			}
			if len(c.Full) < len(c.Words) && len(c.Wrappers) == 0 {
				t.Fatalf("%q: Full %v shorter than Words %v without wrappers", line, c.Full, c.Words)
			}
			if ro && (c.Opaque || c.Dynamic() || c.Privileged) {
				t.Fatalf("%q is read-only but has command %+v", line, c)
			}
			_ = c.RunsArguments()
			for _, w := range c.Words {
				var text strings.Builder
				for _, p := range w.Parts() {
					text.WriteString(p.Text)
				}
				if text.String() != w.Text {
					t.Fatalf("%q: word parts %+v do not make %q", line, w.Parts(), w.Text)
				}
			}
		}
	})
}

// BenchmarkReadOnly parses a new line each time (a comment makes it new),
// which is what a call's first analysis costs; later ones hit the cache.
func BenchmarkReadOnly(b *testing.B) {
	i := 0
	for b.Loop() {
		i++
		line := fmt.Sprintf("git log --oneline -20 | grep -i fix | head -5 && ls -la src 2>/dev/null # %d", i)
		if !ReadOnly(line) {
			b.Fatal("not read-only")
		}
	}
}

// A line parsed again gives the same Script (or error) without parsing it
// again; the cache forgets the oldest lines and never holds long ones.
func TestParseRemembersRecentLines(t *testing.T) {
	first, err := Parse("ls -la && cat go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Parse("ls -la && cat go.mod"); again != first {
		t.Error("a repeated line was parsed again")
	}
	if _, err := Parse("echo 'open"); err == nil {
		t.Fatal("unterminated quote parsed")
	} else if _, again := Parse("echo 'open"); again == nil || again.Error() != err.Error() {
		t.Errorf("repeated bad line: error %v, want %v", again, err)
	}
	for i := range parseCacheLines {
		if _, err := Parse(fmt.Sprintf("echo %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := Parse("ls -la && cat go.mod"); again == first {
		t.Errorf("the oldest line is still remembered after %d newer ones", parseCacheLines)
	}
	long := "echo " + strings.Repeat("x", parseCacheLineLen)
	a, _ := Parse(long)
	if b, _ := Parse(long); a == b || len(a.Commands) != 1 {
		t.Error("a line over the length limit was remembered, or misparsed")
	}
	if len(recent.m) > parseCacheLines || len(recent.order) != len(recent.m) {
		t.Errorf("cache holds %d lines (%d in order), want at most %d", len(recent.m), len(recent.order), parseCacheLines)
	}
}
