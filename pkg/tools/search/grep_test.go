package search

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
)

func TestGrep(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Fatalf("ripgrep is required for these tests: %v", err)
	}
	env, dir := newEnv(t)
	standardTree(t, dir)
	makeTree(t, dir, []file{
		{"code/main.go", "package main\n\nfunc Needle() {}\n", 9},
		{"code/view.tsx", "const NEEDLE = 1\n", 10},
		{".hidden/h.txt", "hidden needle\n", 11},
		{".git/config", "needle in git\n", 12},
		{".gitignore", "ignored.txt\n", 13},
		{"ignored.txt", "needle ignored\n", 14},
		{".env", "TOKEN=needle\n", 15},
		{"keys/.ssh/id", "needle key\n", 16},
		{"multi.txt", "start\nmiddle\nend\n", 17},
		{"we:ird.txt", "x:y needle\n", 18},
	})
	outside := t.TempDir()
	makeTree(t, outside, []file{{"o.txt", "needle outside\n", 0}})
	if err := os.Symlink(outside, dir+"/out"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside+"/o.txt", dir+"/o-link.txt"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", dir+"/sublink"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		input map[string]any
		want  want
	}{
		{"files, newest first", map[string]any{"pattern": "needle", "glob": "*.txt", "path": dir + "/sub"},
			want{text: "Found 1 file\nsub/d.txt"}},
		{"files default mode", map[string]any{"pattern": "needle in|b needle|delta"},
			want{text: "Found 3 files\nsub/d.txt\nb.txt\na.txt"}},
		{"hidden yes, .git and ignored no, protected no, links no", map[string]any{"pattern": "needle"},
			want{text: "Found 5 files\nsub/d.txt\nb.txt\na.txt\n.hidden/h.txt\nwe:ird.txt"}},
		{"content", map[string]any{"pattern": "needle", "output_mode": "content", "glob": "{a,b}.txt"},
			want{text: "a.txt:2:needle in a\nb.txt:1:b needle\nb.txt:5:needle again"}},
		{"content without numbers, one file", map[string]any{"pattern": "needle", "output_mode": "content", "-n": false, "path": "sub/d.txt"},
			want{text: "delta needle needle"}},
		{"content with numbers, one file", map[string]any{"pattern": "needle", "output_mode": "content", "path": "sub/d.txt"},
			want{text: "1:delta needle needle"}},
		{"content without numbers", map[string]any{"pattern": "needle", "output_mode": "content", "-n": false, "glob": "*.txt", "path": "sub"},
			want{text: "sub/d.txt:delta needle needle"}},
		{"file names with colons", map[string]any{"pattern": "x:y", "output_mode": "content"},
			want{text: "we:ird.txt:1:x:y needle"}},
		{"context", map[string]any{"pattern": "needle", "output_mode": "content", "-C": 1, "glob": "{a,b}.txt"},
			want{text: "a.txt-1-alpha line 1\na.txt:2:needle in a\na.txt-3-alpha line 3\n--\nb.txt:1:b needle\nb.txt-2-x\n--\nb.txt-4-z\nb.txt:5:needle again"}},
		{"after context", map[string]any{"pattern": "b needle", "output_mode": "content", "-A": 1}, want{text: "b.txt:1:b needle\nb.txt-2-x"}},
		{"before context", map[string]any{"pattern": "again", "output_mode": "content", "-B": 1, "-n": false}, want{text: "b.txt-z\nb.txt:needle again"}},
		{"only matching", map[string]any{"pattern": "del[a-z]+", "output_mode": "content", "-o": true}, want{text: "sub/d.txt:1:delta"}},
		{"ignore case", map[string]any{"pattern": "NeEdLe = ", "-i": true}, want{text: "Found 1 file\ncode/view.tsx"}},
		{"type", map[string]any{"pattern": "(?i)needle", "type": "go"}, want{text: "Found 1 file\ncode/main.go"}},
		{"glob list", map[string]any{"pattern": "(?i)needle", "glob": "*.go,*.tsx"}, want{text: "Found 2 files\ncode/main.go\ncode/view.tsx"}},
		{"count", map[string]any{"pattern": "needle", "output_mode": "count", "path": "."},
			want{text: ".hidden/h.txt:1\na.txt:1\nb.txt:2\nsub/d.txt:1\nwe:ird.txt:1\n\nFound 6 total occurrences across 5 files."}},
		{"count one", map[string]any{"pattern": "delta", "output_mode": "count"},
			want{text: "sub/d.txt:1\n\nFound 1 total occurrence across 1 file."}},
		{"multiline", map[string]any{"pattern": "start.middle", "multiline": true, "output_mode": "content"},
			want{text: "multi.txt:1:start\nmulti.txt:2:middle"}},
		{"not multiline", map[string]any{"pattern": "start.middle", "output_mode": "content"}, want{text: "No matches found"}},
		{"head_limit", map[string]any{"pattern": "needle", "head_limit": 2},
			want{text: "Found 5 files\nsub/d.txt\nb.txt\n\n[Showing 2 of 5 files, from offset 0. Call again with offset=2 for more, or narrow the search.]"}},
		{"offset", map[string]any{"pattern": "needle", "head_limit": 2, "offset": 4},
			want{text: "Found 5 files\nwe:ird.txt\n\n[Showing 1 of 5 files, from offset 4.]"}},
		{"head_limit zero is unlimited", map[string]any{"pattern": "needle", "head_limit": 0, "offset": 3},
			want{text: "Found 5 files\n.hidden/h.txt\nwe:ird.txt\n\n[Showing 2 of 5 files, from offset 3.]"}},
		{"symlinked directory as path", map[string]any{"pattern": "needle", "path": "sublink"}, want{text: "Found 1 file\nsublink/d.txt"}},
		{"no match", map[string]any{"pattern": "absent-string"}, want{text: "No files found"}},
		{"bad regex", map[string]any{"pattern": "a(b"}, want{isError: true}}, // text checked below
		{"missing path", map[string]any{"pattern": "x", "path": "nonexistent-dir"},
			want{text: tool.WrapUseError("Path does not exist: " + dir + "/nonexistent-dir. Note: your current working directory is " + dir + "."), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"link out as path", map[string]any{"pattern": "needle", "path": "out"},
			want{text: tool.WrapUseError("Access to " + dir + "/out was denied: it leads through a symbolic link to " + outside + ", which is outside the directories this session may use (" + dir + " (read-write))."), isError: true, outcome: tool.OutcomeSandboxDenied}},
		{"protected path", map[string]any{"pattern": "needle", "path": ".env"},
			want{text: tool.WrapUseError("Access to " + dir + `/.env was denied: it matches the protected-file pattern "**/.env".`), isError: true, outcome: tool.OutcomeSandboxDenied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, &Grep{}, env, jsonInput(t, tt.input))
			if tt.name == "bad regex" {
				if !r.IsError || !strings.Contains(r.TextContent(), "regex parse error") {
					t.Errorf("bad regex: %+v %q", r, r.TextContent())
				}
				return
			}
			check(t, r, tt.want)
		})
	}
}

func TestGrepMissingBinary(t *testing.T) {
	env, dir := newEnv(t)
	standardTree(t, dir)
	r := call(t, &Grep{Rg: dir + "/no-such-rg"}, env, `{"pattern":"needle"}`)
	want := "Grep cannot run: it needs the ripgrep binary (" + dir + "/no-such-rg), which was not found"
	if !r.IsError || !strings.HasPrefix(r.TextContent(), want) {
		t.Errorf("got %q, want prefix %q", r.TextContent(), want)
	}
}

func TestGrepOutputCap(t *testing.T) {
	env, dir := newEnv(t)
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "needle %d\n", i)
	}
	makeTree(t, dir, []file{{"many.txt", b.String(), 0}})
	env.Limits.MaxOutputMemory = 1000
	got := call(t, &Grep{}, env, `{"pattern":"needle","output_mode":"content","head_limit":0}`).TextContent()
	if !strings.HasPrefix(got, "many.txt:1:needle 0\n") || !strings.HasSuffix(got, "[ripgrep produced more than 1000 bytes of output; the search was stopped there. Narrow the pattern, path, glob or type.]") {
		t.Errorf("capped output: %q", got)
	}
	env.Limits.MaxOutputMemory, env.Limits.MaxOutputChars = 0, 100
	got = call(t, &Grep{}, env, `{"pattern":"needle","output_mode":"content","head_limit":0}`).TextContent()
	if want := "many.txt:1:needle 0\nmany.txt:2:needle 1\nmany.txt:3:needle 2\nmany.txt:4:needle 3\nmany.txt:5:needle 4\n\n[Output cut at 99 of "; !strings.HasPrefix(got, want) {
		t.Errorf("char cap: %q", got)
	}
}

func TestGrepCancelled(t *testing.T) {
	env, dir := newEnv(t)
	standardTree(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := (&Grep{}).Run(ctx, env, &tool.Call{Input: []byte(`{"pattern":"needle"}`), Progress: func(tool.Progress) {}})
	if !r.IsError || !strings.HasPrefix(r.TextContent(), "grep: interrupted: context canceled") {
		t.Errorf("cancelled Grep: %q", r.TextContent())
	}
	if kids := children(); len(kids) > 0 {
		t.Errorf("ripgrep still running: %v", kids)
	}
}

func TestSplitGlobs(t *testing.T) {
	got := splitGlobs("*.go, *.{ts,tsx} src/**,,x")
	want := []string{"*.go", "*.{ts,tsx}", "src/**", "x"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitGlobs = %q, want %q", got, want)
	}
}

func TestSpecs(t *testing.T) {
	for _, tl := range Tools() {
		s := tl.Spec()
		if !s.ReadOnly || s.Concurrency != tool.ConcurrencyAlways || !tl.ConcurrencySafe(nil) || s.Description == "" {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
}

// BenchmarkGrep searches a generated tree of 2000 files.
func BenchmarkGrep(b *testing.B) {
	env, dir := newEnv(b)
	var files []file
	for d := range 100 {
		for f := range 20 {
			var body strings.Builder
			for l := range 50 {
				fmt.Fprintf(&body, "func handler%d_%d_%d(w http.ResponseWriter) { return }\n", d, f, l)
			}
			if f == 7 {
				body.WriteString("// the needle is here\n")
			}
			files = append(files, file{fmt.Sprintf("pkg%d/file%d.go", d, f), body.String(), f})
		}
	}
	makeTree(b, dir, files)
	g := &Grep{}
	for _, mode := range []string{"files_with_matches", "content"} {
		b.Run(mode, func(b *testing.B) {
			input := `{"pattern":"needle is","output_mode":"` + mode + `"}`
			for b.Loop() {
				r := call(b, g, env, input)
				if r.IsError || !strings.Contains(r.TextContent(), "pkg0/file7.go") {
					b.Fatal(r.TextContent())
				}
			}
		})
	}
}
