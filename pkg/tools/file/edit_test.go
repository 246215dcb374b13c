package file

import (
	"os"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
)

func TestEdit(t *testing.T) {
	type edit = map[string]any
	tests := []struct {
		name    string
		initial string // content of A.txt; "-" for no file
		read    bool   // Read A.txt before the edit
		between func(t *testing.T, name string)
		input   edit // file_path defaults to the absolute A.txt
		want    func(dir string) want
		after   string // content of A.txt afterwards; "-" for no file
	}{
		{name: "replace once", initial: "line one\nline two\n", read: true,
			input: edit{"old_string": "one", "new_string": "1"},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated successfully." + upToDate}
			},
			after: "line 1\nline two\n"},
		{name: "replace all", initial: "dup dup dup\n", read: true,
			input: edit{"old_string": "dup", "new_string": "x", "replace_all": true},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated. All occurrences were successfully replaced." + upToDate}
			},
			after: "x x x\n"},
		{name: "relative path echoed", initial: "a\n", read: true,
			input: edit{"file_path": "A.txt", "old_string": "a", "new_string": "b"},
			want:  func(string) want { return want{text: "The file A.txt has been updated successfully." + upToDate} },
			after: "b\n"},
		{name: "never read", initial: "a\n",
			input: edit{"old_string": "a", "new_string": "b"},
			want:  func(string) want { return notRead },
			after: "a\n"},
		{name: "not found", initial: "a\n", read: true,
			input: edit{"old_string": "NOT PRESENT", "new_string": "b"},
			want: func(string) want {
				return want{text: wrapped("String to replace not found in file.\nString: NOT PRESENT"), isError: true, outcome: tool.OutcomeInvalidInput}
			},
			after: "a\n"},
		{name: "found twice", initial: "dup\ndup\n", read: true,
			input: edit{"old_string": "dup", "new_string": "x"},
			want: func(string) want {
				return want{text: wrapped("Found 2 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: dup"), isError: true}
			},
			after: "dup\ndup\n"},
		{name: "same strings", initial: "a\n", read: true,
			input: edit{"old_string": "a", "new_string": "a"},
			want: func(string) want {
				return want{text: wrapped("No changes to make: old_string and new_string are exactly the same."), isError: true}
			},
			after: "a\n"},
		{name: "missing file", initial: "-",
			input: edit{"old_string": "x", "new_string": "y"},
			want: func(dir string) want {
				return want{text: wrapped("File does not exist. Note: your current working directory is " + dir + "."), isError: true, outcome: tool.OutcomeInvalidInput}
			},
			after: "-"},
		{name: "create with empty old_string", initial: "-",
			input: edit{"old_string": "", "new_string": "fresh\n"},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated successfully." + upToDate}
			},
			after: "fresh\n"},
		{name: "empty old_string on existing file", initial: "content\n", read: true,
			input: edit{"old_string": "", "new_string": "x"},
			want: func(string) want {
				return want{text: wrapped("Cannot create new file - file already exists."), isError: true}
			},
			after: "content\n"},
		{name: "empty old_string fills an empty file", initial: "", read: true,
			input: edit{"old_string": "", "new_string": "x\n"},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated successfully." + upToDate}
			},
			after: "x\n"},
		{name: "changed on disk since read", initial: "line one\n", read: true,
			between: func(t *testing.T, name string) {
				f, _ := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString("more\n")
				f.Close()
				bumpMtime(t, name)
			},
			input: edit{"old_string": "one", "new_string": "1"},
			want:  func(string) want { return modified },
			after: "line one\nmore\n"},
		{name: "touched since read", initial: "line one\n", read: true,
			between: func(t *testing.T, name string) { bumpMtime(t, name) },
			input:   edit{"old_string": "one", "new_string": "1"},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated successfully." + upToDate}
			},
			after: "line 1\n"},
		{name: "crlf file keeps its line ends", initial: "a\r\nb\r\nc\r\n", read: true,
			input: edit{"old_string": "a\nb", "new_string": "A\nB"},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated successfully." + upToDate}
			},
			after: "A\r\nB\r\nc\r\n"},
		{name: "dollar signs are literal", initial: "x\n", read: true,
			input: edit{"old_string": "x", "new_string": "$1 $& $$"},
			want: func(dir string) want {
				return want{text: "The file " + dir + "/A.txt has been updated successfully." + upToDate}
			},
			after: "$1 $& $$\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, dir := newEnv(t)
			name := dir + "/A.txt"
			if tt.initial != "-" {
				writeFile(t, name, tt.initial)
			}
			if tt.read {
				if r := call(t, &Read{}, env, `{"file_path":"A.txt"}`); r.IsError {
					t.Fatal(r.TextContent())
				}
			}
			if tt.between != nil {
				tt.between(t, name)
			}
			if _, ok := tt.input["file_path"]; !ok {
				tt.input["file_path"] = name
			}
			check(t, call(t, &Edit{}, env, jsonInput(t, tt.input)), tt.want(dir))
			got, err := os.ReadFile(name)
			if tt.after == "-" {
				if err == nil {
					t.Errorf("file exists: %q", got)
				}
			} else if string(got) != tt.after {
				t.Errorf("file = %q, %v; want %q", got, err, tt.after)
			}
		})
	}
}

// TestEditSequence follows a session: an edit records the new state, so
// further edits need no Read, and a Read afterwards shows the new text.
func TestEditSequence(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/s.txt", "one\ntwo\nthree\n")
	runSteps(t, env, []step{
		{&Read{}, map[string]any{"file_path": "s.txt"}, want{text: "1\tone\n2\ttwo\n3\tthree\n4\t"}, nil},
		{&Edit{}, map[string]any{"file_path": "s.txt", "old_string": "one", "new_string": "1"},
			want{text: "The file s.txt has been updated successfully." + upToDate}, nil},
		{&Edit{}, map[string]any{"file_path": "s.txt", "old_string": "two", "new_string": "2"},
			want{text: "The file s.txt has been updated successfully." + upToDate}, nil},
		{&Read{}, map[string]any{"file_path": "s.txt"}, want{text: "1\t1\n2\t2\n3\tthree\n4\t"}, nil},
		{&Read{}, map[string]any{"file_path": "s.txt"}, want{text: msgUnchanged}, nil},
	})
	if got := readFile(t, dir+"/s.txt"); got != "1\n2\nthree\n" {
		t.Errorf("file = %q", got)
	}
}

func TestEditThroughSymlink(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/real.txt", "target\n")
	if err := os.Symlink(dir+"/real.txt", dir+"/link.txt"); err != nil {
		t.Fatal(err)
	}
	call(t, &Read{}, env, `{"file_path":"link.txt"}`)
	check(t, call(t, &Edit{}, env, `{"file_path":"link.txt","old_string":"target","new_string":"changed"}`),
		want{text: "The file link.txt has been updated successfully." + upToDate})
	if got := readFile(t, dir+"/real.txt"); got != "changed\n" {
		t.Errorf("real.txt = %q", got)
	}
	if fi, err := os.Lstat(dir + "/link.txt"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a symbolic link")
	}
}

func FuzzReplace(f *testing.F) {
	f.Add("a\r\nb\r\n", "a\nb", "x", false)
	f.Add("dup dup", "dup", "d", true)
	f.Fuzz(func(t *testing.T, content, from, to string, all bool) {
		out, err := replace(content, from, to, all)
		if err != nil {
			return
		}
		if from == "" {
			return
		}
		// Whatever the line ends, the replacement text is in the result:
		// as given, or with its line ends made the file's. (A lone "\r"
		// before a "\n" of the file reads as a CRLF once normalised.)
		normalized := strings.Contains(strings.ReplaceAll(out, "\r\n", "\n"), strings.ReplaceAll(to, "\r\n", "\n"))
		if !strings.Contains(out, to) && !normalized {
			t.Errorf("replace(%q, %q, %q) = %q lacks the new text", content, from, to, out)
		}
	})
}
