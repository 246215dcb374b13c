package file

import (
	"os"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

const upToDate = " (file state is current in your context — no need to Read it back)"

var (
	notRead  = want{text: wrapped("File has not been read yet. Read it first before writing to it."), isError: true, outcome: tool.OutcomeInvalidInput}
	modified = want{text: wrapped("File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."), isError: true, outcome: tool.OutcomeInvalidInput}
)

// step is one call in a scripted session.
type step struct {
	tool  tool.Tool
	input map[string]any
	want  want
	then  func(t *testing.T) // runs after the call: file checks, outside changes
}

func runSteps(t *testing.T, env *tool.Env, steps []step) {
	t.Helper()
	for i, s := range steps {
		r := call(t, s.tool, env, jsonInput(t, s.input))
		if t.Failed() {
			return
		}
		check(t, r, s.want)
		if t.Failed() {
			t.Fatalf("step %d (%s %v) failed", i, s.tool.Spec().Name, s.input)
		}
		if s.then != nil {
			s.then(t)
		}
	}
}

func TestWrite(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/existing.txt", "old\n")
	writeFile(t, dir+"/a.txt", "a\n")
	fileIs := func(name, content string) func(*testing.T) {
		return func(t *testing.T) {
			if got := readFile(t, name); got != content {
				t.Errorf("%s = %q, want %q", name, got, content)
			}
		}
	}
	runSteps(t, env, []step{
		{&Write{}, map[string]any{"file_path": dir + "/E.txt", "content": "e\n"},
			want{text: "File created successfully at: " + dir + "/E.txt" + upToDate}, fileIs(dir+"/E.txt", "e\n")},
		{&Write{}, map[string]any{"file_path": dir + "/new/deep/N.txt", "content": "n"},
			want{text: "File created successfully at: " + dir + "/new/deep/N.txt" + upToDate}, fileIs(dir+"/new/deep/N.txt", "n")},
		{&Write{}, map[string]any{"file_path": dir + "/E.txt", "content": "e2\n"},
			want{text: "The file " + dir + "/E.txt has been updated successfully." + upToDate}, fileIs(dir+"/E.txt", "e2\n")},
		{&Write{}, map[string]any{"file_path": dir + "/existing.txt", "content": "clobber"},
			notRead, fileIs(dir+"/existing.txt", "old\n")},
		{&Read{}, map[string]any{"file_path": "a.txt"}, want{text: "1\ta\n2\t"}, nil},
		{&Write{}, map[string]any{"file_path": "a.txt", "content": "A\n"},
			want{text: "The file a.txt has been updated successfully." + upToDate}, fileIs(dir+"/a.txt", "A\n")},
		// The write was recorded: writing again needs no Read.
		{&Write{}, map[string]any{"file_path": "a.txt", "content": "AA\n"},
			want{text: "The file a.txt has been updated successfully." + upToDate}, fileIs(dir+"/a.txt", "AA\n")},
	})

	t.Run("modified since read", func(t *testing.T) {
		name := dir + "/m.txt"
		writeFile(t, name, "line one\n")
		runSteps(t, env, []step{
			{&Read{}, map[string]any{"file_path": name}, want{text: "1\tline one\n2\t"}, func(t *testing.T) {
				f, _ := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString("appended\n")
				f.Close()
				bumpMtime(t, name)
			}},
			{&Write{}, map[string]any{"file_path": name, "content": "mine"}, modified, fileIs(name, "line one\nappended\n")},
		})
	})
	t.Run("touch does not count as a change", func(t *testing.T) {
		name := dir + "/touched.txt"
		writeFile(t, name, "same\n")
		runSteps(t, env, []step{
			{&Read{}, map[string]any{"file_path": name}, want{text: "1\tsame\n2\t"}, func(t *testing.T) { bumpMtime(t, name) }},
			{&Write{}, map[string]any{"file_path": name, "content": "new\n"},
				want{text: "The file " + name + " has been updated successfully." + upToDate}, fileIs(name, "new\n")},
		})
	})
	t.Run("directory", func(t *testing.T) {
		check(t, call(t, &Write{}, env, jsonInput(t, map[string]any{"file_path": "new", "content": "x"})),
			want{text: wrapped(dir + "/new is a directory, not a file."), isError: true})
	})
	t.Run("keeps mode", func(t *testing.T) {
		name := dir + "/run.sh"
		writeFile(t, name, "#!/bin/sh\n")
		os.Chmod(name, 0o755)
		call(t, &Read{}, env, `{"file_path":"run.sh"}`)
		check(t, call(t, &Write{}, env, `{"file_path":"run.sh","content":"#!/bin/sh\necho\n"}`),
			want{text: "The file run.sh has been updated successfully." + upToDate})
		if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o755 {
			t.Errorf("mode %v, want 0755", fi.Mode().Perm())
		}
	})
	t.Run("denied", func(t *testing.T) {
		check(t, call(t, &Write{}, env, `{"file_path":"../escape.txt","content":"x"}`), want{
			text:    wrapped("Access to " + strings.TrimSuffix(dir, "/"+lastElem(dir)) + "/escape.txt was denied: it is outside the directories this session may use (" + dir + " (read-write))."),
			isError: true, outcome: tool.OutcomeSandboxDenied,
		})
	})
}

func lastElem(p string) string { return p[strings.LastIndex(p, "/")+1:] }

func TestWriteReadOnlyRoot(t *testing.T) {
	ro := t.TempDir()
	writeFile(t, ro+"/ref.txt", "ref\n")
	env, dir := newEnv(t, func(c *workspace.Config) { c.ReadOnly = []string{ro} })
	call(t, &Read{}, env, `{"file_path":"`+ro+`/ref.txt"}`)
	w := want{
		text:    wrapped("Writing to " + ro + "/ref.txt was denied: it lies in the read-only directory " + ro + "; this session may change files only under " + dir + "."),
		isError: true, outcome: tool.OutcomeSandboxDenied,
	}
	check(t, call(t, &Write{}, env, jsonInput(t, map[string]any{"file_path": ro + "/ref.txt", "content": "x"})), w)
	check(t, call(t, &Edit{}, env, jsonInput(t, map[string]any{"file_path": ro + "/ref.txt", "old_string": "ref", "new_string": "x"})), w)
	if got := readFile(t, ro+"/ref.txt"); got != "ref\n" {
		t.Errorf("read-only file changed: %q", got)
	}
}
