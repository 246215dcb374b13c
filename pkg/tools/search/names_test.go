package search

import (
	"os/exec"
	"strings"
	"testing"
)

// namesTree holds names that could pass for other entries if printed as
// they are, each with a needle, newest first in this order.
var namesTree = []file{
	{"plain.txt", "needle\n", 1},
	{"x.txt\nfake.txt", "needle\n", 2},
	{`"x.txt\nfake.txt"`, "needle\n", 3}, // quotes and a backslash, no newline
	{"bad\xff.txt", "needle\n", 4},
	{"tab\there.txt", "needle\n", 5},
	{"dir\nx/f.txt", "needle\nx\nx\nx\nneedle\n", 6},
	{"line\u2028sep.txt", "needle\n", 7},
}

// shown is how each name of namesTree is written in a result.
var shown = []string{
	"plain.txt",
	`"x.txt\nfake.txt"`,
	`"\"x.txt\\nfake.txt\""`,
	`"bad\xff.txt"`,
	`"tab\there.txt"`,
	`"dir\nx/f.txt"`,
	`"line\u2028sep.txt"`,
}

// TestGlobNamesThatNeedQuotes: every match is one line, and no name can
// pass for another; ordinary names are shown as they are.
func TestGlobNamesThatNeedQuotes(t *testing.T) {
	env, dir := newEnv(t)
	makeTree(t, dir, namesTree)
	check(t, call(t, &Glob{}, env, `{"pattern":"**/*"}`), want{text: strings.Join(shown, "\n")})
}

func TestGrepNamesThatNeedQuotes(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Fatalf("ripgrep is required for these tests: %v", err)
	}
	env, dir := newEnv(t)
	makeTree(t, dir, namesTree)
	check(t, call(t, &Grep{}, env, `{"pattern":"needle"}`), want{text: "Found 7 files\n" + strings.Join(shown, "\n")})

	// Count and content mode list files by name, as shown.
	sorted := []string{shown[2], shown[3], shown[5], shown[6], shown[4], shown[1], shown[0]}
	var counts []string
	for _, n := range sorted {
		c := "1"
		if n == shown[5] {
			c = "2"
		}
		counts = append(counts, n+":"+c)
	}
	check(t, call(t, &Grep{}, env, `{"pattern":"needle","output_mode":"count"}`),
		want{text: strings.Join(counts, "\n") + "\n\nFound 8 total occurrences across 7 files."})
	var lines []string
	for _, n := range sorted {
		lines = append(lines, n+":1:needle")
		if n == shown[5] {
			lines = append(lines, n+":5:needle")
		}
	}
	check(t, call(t, &Grep{}, env, `{"pattern":"needle","output_mode":"content"}`), want{text: strings.Join(lines, "\n")})

	// With context, groups are told apart in a file whose name holds a
	// newline, as in any other.
	check(t, call(t, &Grep{}, env, `{"pattern":"needle","output_mode":"content","-A":1,"glob":"f.txt"}`), want{
		text: shown[5] + ":1:needle\n" + shown[5] + "-2-x\n--\n" + shown[5] + ":5:needle"})
}

func TestQuoteName(t *testing.T) {
	cases := map[string]string{
		"a.txt":           "a.txt",
		"dir/ünïcode.txt": "dir/ünïcode.txt",
		"with space.txt":  "with space.txt",
		"we:ird.txt":      "we:ird.txt",
		`mid"quote.txt`:   `mid"quote.txt`,
		`"lead.txt`:       `"\"lead.txt"`,
		"nl\n.txt":        `"nl\n.txt"`,
		"cr\r.txt":        `"cr\r.txt"`,
		"del\x7f.txt":     `"del\x7f.txt"`,
		"c1\u0085.txt":    `"c1\u0085.txt"`,
		"esc\x1b[31m.txt": `"esc\x1b[31m.txt"`,
		"bad\xc3.txt":     `"bad\xc3.txt"`,
		"para\u2029.txt":  `"para\u2029.txt"`,
		`back\slash.txt`:  `back\slash.txt`,
	}
	for in, want := range cases {
		if got := quoteName(in); got != want {
			t.Errorf("quoteName(%q) = %s, want %s", in, got, want)
		}
	}
}
