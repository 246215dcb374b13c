package search

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
)

func TestGlob(t *testing.T) {
	env, dir := newEnv(t)
	standardTree(t, dir)
	makeTree(t, dir, []file{
		{"sub/deeper/e.go", "package e\n", 4},
		{".hidden/h.txt", "h", 5},
		{".env", "SECRET=1", 6},
		{".ssh/config", "Host x", 7},
	})
	outside := t.TempDir()
	makeTree(t, outside, []file{{"o.txt", "o", 0}})
	if err := os.Symlink(outside, dir+"/out"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input map[string]any
		want  want
	}{
		{"recursive, newest first", map[string]any{"pattern": "**/*.txt"}, want{text: "sub/d.txt\nb.txt\na.txt"}},
		{"top level only", map[string]any{"pattern": "*.txt"}, want{text: "b.txt\na.txt"}},
		{"braces", map[string]any{"pattern": "**/*.{go,txt}"}, want{text: "sub/d.txt\nb.txt\na.txt\nsub/deeper/e.go"}},
		{"static prefix", map[string]any{"pattern": "sub/**/*.go"}, want{text: "sub/deeper/e.go"}},
		{"relative path", map[string]any{"pattern": "*.txt", "path": "sub"}, want{text: "sub/d.txt"}},
		{"absolute pattern", map[string]any{"pattern": dir + "/sub/**/*"}, want{text: "sub/d.txt\nsub/deeper/e.go"}},
		{"dot directories need a dot", map[string]any{"pattern": ".hidden/*"}, want{text: ".hidden/h.txt"}},
		{"protected files never listed", map[string]any{"pattern": ".*"}, want{text: "No files found"}},
		{"protected directories never entered", map[string]any{"pattern": ".ssh/*"}, want{text: "No files found"}},
		{"links are not followed", map[string]any{"pattern": "out/*"}, want{text: "No files found"}},
		{"no match", map[string]any{"pattern": "**/*.rs"}, want{text: "No files found"}},
		{"missing directory", map[string]any{"pattern": "*", "path": "nonexistent-dir"},
			want{text: tool.WrapUseError("Directory does not exist: " + dir + "/nonexistent-dir. Note: your current working directory is " + dir + "."), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"a file as path", map[string]any{"pattern": "*", "path": "a.txt"},
			want{text: tool.WrapUseError("Path is not a directory: " + dir + "/a.txt. Give a directory as path, and the file names to look for as pattern."), isError: true}},
		{"bad pattern", map[string]any{"pattern": "[abc"},
			want{text: tool.WrapUseError(`Invalid glob pattern "[abc": glob "[abc": syntax error in pattern`), isError: true}},
		{"outside", map[string]any{"pattern": "*", "path": outside},
			want{text: tool.WrapUseError("Access to " + outside + " was denied: it is outside the directories this session may use (" + dir + " (read-write))."), isError: true, outcome: tool.OutcomeSandboxDenied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, call(t, &Glob{}, env, jsonInput(t, tt.input)), tt.want) })
	}
}

func TestGlobOutsideCwdIsAbsolute(t *testing.T) {
	env, dir := newEnv(t)
	standardTree(t, dir)
	env.SetCwd(filepath.Join(dir, "sub"))
	check(t, call(t, &Glob{}, env, `{"pattern":"**/*.txt","path":"`+dir+`"}`),
		want{text: "d.txt\n" + dir + "/b.txt\n" + dir + "/a.txt"})
}

func TestGlobLimit(t *testing.T) {
	env, dir := newEnv(t)
	standardTree(t, dir)
	check(t, call(t, &Glob{Limit: 2}, env, `{"pattern":"**/*.txt"}`), want{
		text: "sub/d.txt\nb.txt\n(Results are truncated: these are the 2 most recently modified of 3 matches. Narrow the path or the pattern to see the others.)",
	})
}
