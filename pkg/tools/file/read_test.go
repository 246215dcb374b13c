package file

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// numberedLines returns "line 1\n...line n\n".
func numberedLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// tinyPNG is a valid 4x3 PNG.
var tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x04\x00\x00\x00\x03\x08\x02\x00\x00\x00\x9c\x8f\x1d\x1b\x00\x00\x00\x12IDATx\x9cc\xf8\xcf\xc0\x00\x47\x0c\x20\x00\x00\x8d\x0e\x0b\xf5\x89\xd9\x9a\xa3\x00\x00\x00\x00IEND\xaeB`\x82")

func TestRead(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/a.txt", "alpha line 1\nneedle in a\nalpha line 3\n")
	writeFile(t, dir+"/fifty.txt", numberedLines(50))
	writeFile(t, dir+"/empty.txt", "")
	writeFile(t, dir+"/noeol.txt", "one\ntwo")
	writeFile(t, dir+"/crlf.txt", "a\tb\r\nc\td\r\n")
	writeFile(t, dir+"/blob.dat", "plain text, but the extension says binary")
	writeFile(t, dir+"/nul.txt", "text\x00more")
	writeFile(t, dir+"/doc.pdf", "%PDF-1.4")
	writeFile(t, dir+"/big.txt", strings.Repeat("x", 391987))
	writeFile(t, dir+"/sub/rel.txt", "relative\n")
	if err := os.Mkdir(dir+"/adir", 0o755); err != nil {
		t.Fatal(err)
	}
	binary := "This tool cannot read binary files. The file appears to be a binary .%s file. Please use appropriate tools for binary file analysis."

	tests := []struct {
		name  string
		input map[string]any
		want  want
	}{
		{"whole file", map[string]any{"file_path": dir + "/a.txt"},
			want{text: "1\talpha line 1\n2\tneedle in a\n3\talpha line 3\n4\t"}},
		{"no final newline", map[string]any{"file_path": dir + "/noeol.txt"},
			want{text: "1\tone\n2\ttwo"}},
		{"offset and limit", map[string]any{"file_path": dir + "/fifty.txt", "offset": 10, "limit": 5},
			want{text: "10\tline 10\n11\tline 11\n12\tline 12\n13\tline 13\n14\tline 14"}},
		{"limit only", map[string]any{"file_path": dir + "/fifty.txt", "limit": 2},
			want{text: "1\tline 1\n2\tline 2"}},
		{"offset as a string", map[string]any{"file_path": dir + "/fifty.txt", "offset": "49"},
			want{text: "49\tline 49\n50\tline 50\n51\t"}},
		{"relative path", map[string]any{"file_path": "sub/rel.txt"},
			want{text: "1\trelative\n2\t"}},
		{"crlf and tabs", map[string]any{"file_path": dir + "/crlf.txt"},
			want{text: "1\ta\tb\n2\tc\td\n3\t"}},
		{"missing file", map[string]any{"file_path": dir + "/missing.txt"},
			want{text: "File does not exist. Note: your current working directory is " + dir + ".", isError: true, outcome: tool.OutcomeToolError}},
		{"missing parent is a file", map[string]any{"file_path": dir + "/a.txt/x"},
			want{text: "File does not exist. Note: your current working directory is " + dir + ".", isError: true}},
		{"directory", map[string]any{"file_path": dir + "/adir"},
			want{text: "EISDIR: illegal operation on a directory, read '" + dir + "/adir'", isError: true}},
		{"empty file", map[string]any{"file_path": dir + "/empty.txt"},
			want{text: "<system-reminder>Warning: the file exists but is shorter than the provided offset (1). The file has 1 lines.</system-reminder>"}},
		{"offset past the end", map[string]any{"file_path": dir + "/fifty.txt", "offset": 100},
			want{text: "<system-reminder>Warning: the file exists but is shorter than the provided offset (100). The file has 51 lines.</system-reminder>"}},
		{"binary extension", map[string]any{"file_path": dir + "/blob.dat"},
			want{text: wrapped(fmt.Sprintf(binary, "dat")), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"NUL bytes", map[string]any{"file_path": dir + "/nul.txt"},
			want{text: wrapped(fmt.Sprintf(binary, "txt")), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"not really a pdf", map[string]any{"file_path": dir + "/doc.pdf"},
			want{text: "The PDF file is not valid, so it cannot be read (xref table: no header version available).", isError: true}},
		{"pages on a text file: checked, then ignored", map[string]any{"file_path": dir + "/noeol.txt", "pages": "2"},
			want{text: "1\tone\n2\ttwo"}},
		{"bad pages on a text file", map[string]any{"file_path": dir + "/noeol.txt", "pages": ""},
			want{text: wrapped(`Invalid pages parameter: "". Use formats like "1-5", "3", or "10-20". Pages are 1-indexed.`), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"over the size cap", map[string]any{"file_path": dir + "/big.txt"},
			want{text: "File content (382.8KB) exceeds maximum allowed size (256KB). Use offset and limit parameters to read specific portions of the file, or search for specific content instead of reading the whole file.", isError: true}},
		{"outside the workspace", map[string]any{"file_path": "/etc/hostname"},
			want{text: wrapped("Access to /etc/hostname was denied: it is outside the directories this session may use (" + dir + " (read-write))."), isError: true, outcome: tool.OutcomeSandboxDenied}},
		{"protected file", map[string]any{"file_path": ".env"},
			want{text: wrapped("Access to " + dir + `/.env was denied: it matches the protected-file pattern "**/.env".`), isError: true, outcome: tool.OutcomeSandboxDenied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.Reads = tool.NewFileState()
			check(t, call(t, &Read{}, env, jsonInput(t, tt.input)), tt.want)
		})
	}
}

func TestReadSizeCapFollowsLimits(t *testing.T) {
	env, dir := newEnv(t)
	env.Limits.MaxReadBytes = 1000
	writeFile(t, dir+"/f.txt", strings.Repeat("y\n", 1000))
	check(t, call(t, &Read{}, env, `{"file_path":"f.txt"}`), want{
		text:    "File content (2KB) exceeds maximum allowed size (1000 bytes). Use offset and limit parameters to read specific portions of the file, or search for specific content instead of reading the whole file.",
		isError: true,
	})
	// With a range, the cap does not apply.
	check(t, call(t, &Read{}, env, `{"file_path":"f.txt","offset":999,"limit":5}`), want{text: "999\ty\n1000\ty\n1001\t"})
}

func TestReadManyLines(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/long.txt", numberedLines(3000))
	writeFile(t, dir+"/wide.txt", strings.Repeat("w", 5000)+"\n")
	got := call(t, &Read{}, env, `{"file_path":"long.txt"}`).TextContent()
	lines := strings.Split(got, "\n")
	if len(lines) != 3001 || lines[2999] != "3000\tline 3000" || lines[3000] != "3001\t" {
		t.Errorf("3000-line file: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	check(t, call(t, &Read{}, env, `{"file_path":"wide.txt"}`), want{text: "1\t" + strings.Repeat("w", 5000) + "\n2\t"})
}

func TestReadTokenCap(t *testing.T) {
	env, dir := newEnv(t)
	// 1800 lines of 110 characters and the empty line after the last "\n":
	// ~200 KB, under the size cap, far over the token cap.
	line := strings.Repeat("t", 110)
	writeFile(t, dir+"/wide.txt", strings.Repeat(line+"\n", 1800))

	// The estimate counts every character of the numbered text, a newline
	// per line included, divided by four and rounded up.
	runes, page := 0, 0
	for i := 1; i <= 1801; i++ {
		n := len(strconv.Itoa(i)) + 2 + len(line)
		if i == 1801 {
			n = len(strconv.Itoa(i)) + 2
		}
		runes += n
		if runes <= DefaultMaxTokens*85/100*4 {
			page = i
		}
	}
	tokens := (runes + 3) / 4
	var body []string
	for i := 1; i <= page; i++ {
		body = append(body, strconv.Itoa(i)+"\t"+line)
	}
	wantText := fmt.Sprintf("<system-reminder>[Truncated: PARTIAL view — showing lines 1-%d of 1801 total (%d tokens, cap 25000). Call Read with offset=%d limit=%d for the next page, or Grep to find a specific section. Do NOT answer from this page alone if the answer may be further in the file.]</system-reminder>\n\n", page, tokens, page+1, page) +
		strings.Join(body, "\n")
	check(t, call(t, &Read{}, env, `{"file_path":"wide.txt"}`), want{text: wantText})
	t.Logf("page %d lines, %d tokens", page, tokens)
	if page < 600 || page > 800 || tokens < 50000 {
		t.Fatalf("fixture not as intended: page %d, tokens %d", page, tokens)
	}

	// The next page starts where the note says.
	next := call(t, &Read{}, env, fmt.Sprintf(`{"file_path":"wide.txt","offset":%d,"limit":%d}`, page+1, page)).TextContent()
	if !strings.HasPrefix(next, strconv.Itoa(page+1)+"\t"+line+"\n") || strings.Contains(next, "Truncated") {
		t.Errorf("next page starts %q", next[:40])
	}
	// Asking for the whole file again is not a wasted call: only a page was shown.
	if again := call(t, &Read{}, env, `{"file_path":"wide.txt"}`).TextContent(); again != wantText {
		t.Errorf("re-read after a partial view: %.80q", again)
	}
}

func TestReadImage(t *testing.T) {
	env, dir := newEnv(t)
	if err := os.WriteFile(dir+"/pic.png", tinyPNG, 0o644); err != nil {
		t.Fatal(err)
	}
	// A JPEG named .gif is sent with the type of its bytes.
	jpeg := []byte{0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 'J', 'F', 'I', 'F'}
	if err := os.WriteFile(dir+"/misnamed.gif", jpeg, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, mediaType string
		data            []byte
	}{
		{"pic.png", "image/png", tinyPNG},
		{"misnamed.gif", "image/jpeg", jpeg},
	} {
		r := call(t, &Read{}, env, `{"file_path":"`+tt.name+`"}`)
		if r.IsError || len(r.Content) != 1 || !r.Content[0].IsImage() {
			t.Fatalf("%s: %+v", tt.name, r)
		}
		if c := r.Content[0]; c.MediaType != tt.mediaType || !bytes.Equal(c.Data, tt.data) {
			t.Errorf("%s: got %s %x, want %s %x", tt.name, c.MediaType, c.Data, tt.mediaType, tt.data)
		}
	}
}

func TestReadUnchanged(t *testing.T) {
	env, dir := newEnv(t)
	name := dir + "/f.txt"
	writeFile(t, name, numberedLines(60))
	full := want{text: call(t, &Read{}, env, `{"file_path":"f.txt"}`).TextContent()}
	stub := want{text: "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead."}
	steps := []struct {
		input string
		want  want
	}{
		{`{"file_path":"f.txt"}`, stub},
		{`{"file_path":"` + name + `"}`, stub}, // same file, named absolutely
		{`{"file_path":"f.txt","offset":0}`, stub},
		{`{"file_path":"f.txt","offset":-1,"limit":0}`, stub},
		{`{"file_path":"f.txt","offset":1}`, stub},
		{`{"file_path":"f.txt","offset":48,"limit":2}`, want{text: "48\tline 48\n49\tline 49"}},
		{`{"file_path":"f.txt","offset":48,"limit":2}`, stub},
		{`{"file_path":"f.txt"}`, full}, // the most recent read had another range
		{`{"file_path":"f.txt"}`, stub},
	}
	for i, s := range steps {
		t.Run(strconv.Itoa(i), func(t *testing.T) { check(t, call(t, &Read{}, env, s.input), s.want) })
	}
	t.Run("changed", func(t *testing.T) {
		writeFile(t, name, "new\n")
		bumpMtime(t, name)
		check(t, call(t, &Read{}, env, `{"file_path":"f.txt"}`), want{text: "1\tnew\n2\t"})
	})
	t.Run("touched only", func(t *testing.T) {
		bumpMtime(t, name)
		check(t, call(t, &Read{}, env, `{"file_path":"f.txt"}`), want{text: "1\tnew\n2\t"})
		check(t, call(t, &Read{}, env, `{"file_path":"f.txt"}`), stub)
	})
}

func TestReadRecordsState(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/f.txt", "x\ny\n")
	call(t, &Read{}, env, `{"file_path":"f.txt","offset":2,"limit":1}`)
	rec, ok := env.Reads.Get(dir + "/f.txt")
	fi, _ := os.Stat(dir + "/f.txt")
	if !ok || rec.Content != "x\ny\n" || rec.Offset != 2 || rec.Limit != 1 || !rec.ModTime.Equal(fi.ModTime()) {
		t.Errorf("record = %+v, %v", rec, ok)
	}
}

func TestReadReadOnlyRoot(t *testing.T) {
	ro := t.TempDir()
	writeFile(t, ro+"/ref.txt", "ref\n")
	env, _ := newEnv(t, func(c *workspace.Config) { c.ReadOnly = []string{ro} })
	check(t, call(t, &Read{}, env, `{"file_path":"`+ro+`/ref.txt"}`), want{text: "1\tref\n2\t"})
}

func TestSpecs(t *testing.T) {
	for _, tl := range Tools() {
		s := tl.Spec()
		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
			t.Fatalf("%s: schema: %v", s.Name, err)
		}
		if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties || len(schema.Required) == 0 {
			t.Errorf("%s: schema %+v", s.Name, schema)
		}
		if s.Description == "" {
			t.Errorf("%s: no description", s.Name)
		}
		wantSafe := s.Name == "Read"
		if s.ReadOnly != wantSafe || (s.Concurrency == tool.ConcurrencyAlways) != wantSafe || tl.ConcurrencySafe(nil) != wantSafe {
			t.Errorf("%s: ReadOnly %v Concurrency %v", s.Name, s.ReadOnly, s.Concurrency)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1023: "1023 bytes", 1024: "1KB", 262144: "256KB", 391987: "382.8KB",
		1 << 20: "1MB", 1258291: "1.2MB", 3 << 30: "3GB",
	} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func BenchmarkRead1KiB(b *testing.B) {
	benchmarkRead(b, strings.Repeat(strings.Repeat("k", 63)+"\n", 16))
}

// BenchmarkRead64KiB reads 2,000 lines, numbered past 99.
func BenchmarkRead64KiB(b *testing.B) {
	benchmarkRead(b, strings.Repeat(strings.Repeat("k", 31)+"\n", 2000))
}

// benchmarkRead reads a file of the given text whole, as a fresh session
// does.
func benchmarkRead(b *testing.B, text string) {
	env, dir := newEnv(b)
	writeFile(b, dir+"/k.txt", text)
	r := &Read{}
	in := &tool.Call{Input: json.RawMessage(`{"file_path":"k.txt"}`), Progress: func(tool.Progress) {}}
	b.ReportAllocs()
	for b.Loop() {
		env.Reads = tool.NewFileState() // a fresh session each time: no "unchanged" stub
		if err := r.Validate(b.Context(), env, in.Input); err != nil {
			b.Fatal(err)
		}
		if res := r.Run(b.Context(), env, in); res.IsError {
			b.Fatal(res.TextContent())
		}
	}
}

// TestLineSources checks that a file's lines come out the same whether the
// file is held in memory (files up to maxTrackedBytes) or read as it goes
// (larger ones), and that both follow the line rules: lines end at "\n",
// a trailing "\r" is dropped, and the text after the last "\n" is a line.
func TestLineSources(t *testing.T) {
	long := strings.Repeat("x", 70<<10) // longer than the reader's buffer
	cases := []struct {
		text string
		want []string
	}{
		{"", []string{""}},
		{"a", []string{"a"}},
		{"a\n", []string{"a", ""}},
		{"a\r\nb\r\n", []string{"a", "b", ""}},
		{"\n\n", []string{"", "", ""}},
		{"one\ntwo", []string{"one", "two"}},
		{"cr\rinside\n", []string{"cr\rinside", ""}},
		{long + "\nend", []string{long, "end"}},
	}
	for _, c := range cases {
		for name, src := range map[string]func() lineSource{
			"memory": func() lineSource { return &stringLines{rest: c.text} },
			"reader": func() lineSource { return readerLines{bufio.NewReaderSize(strings.NewReader(c.text), 4096)} },
		} {
			sel, err := selectLines(t.Context(), src(), 1, 0, 1<<30)
			if err != nil {
				t.Fatalf("%s %.20q: %v", name, c.text, err)
			}
			if sel.total != len(c.want) || strings.Join(sel.lines, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s %.20q: %d lines %.60q, want %d %.60q", name, c.text, sel.total, sel.lines, len(c.want), c.want)
			}
			// A range keeps only its lines but counts them all.
			sel, err = selectLines(t.Context(), src(), 2, 1, 1<<30)
			if err != nil {
				t.Fatalf("%s %.20q: %v", name, c.text, err)
			}
			if want := c.want[1:min(2, len(c.want))]; sel.total != len(c.want) || strings.Join(sel.lines, "|") != strings.Join(want, "|") {
				t.Errorf("%s %.20q from line 2: %d lines %.60q, want %d %.60q", name, c.text, sel.total, sel.lines, len(c.want), want)
			}
		}
	}
}

// TestNumbered checks line numbers across widths: the width counted for the
// token estimate and the numbers written.
func TestNumbered(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 99, 100, 999, 1000, 99999, 100000, 1 << 40} {
		if got, want := numberWidth(n), len(strconv.Itoa(n)); got != want {
			t.Errorf("numberWidth(%d) = %d, want %d", n, got, want)
		}
	}
	if got, want := numbered([]string{"a", "", "c\td"}, 99), "99\ta\n100\t\n101\tc\td"; got != want {
		t.Errorf("numbered from 99 = %q, want %q", got, want)
	}
	if got := numbered(nil, 1); got != "" {
		t.Errorf("numbered of no lines = %q", got)
	}
}
