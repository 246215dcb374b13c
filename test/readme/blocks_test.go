package readme

import (
	"strings"
	"testing"
)

const sample = "# Title\n\n## Quickstart\n\n" +
	"<!-- readme-test: first (the rest would recurse) -->\n```sh\nscripts/run -p \"x\" |\n  cat\nscripts/test\n```\n\n" +
	"### Inside\n\n```sh\necho inner\n```\n\n```go\nnot shell\n```\n\n" +
	"<!-- readme-test: root -->\n```sh\necho root\n```\n\n" +
	"<!-- readme-test: user -->\n\n```sh\necho user\n```\n\n" +
	"<!-- readme-test: user -->\nA paragraph ends the marker.\n```sh\necho both\n```\n\n" +
	"## Next\n\n```sh\necho next\n```\n"

func TestBlocks(t *testing.T) {
	blocks, err := Blocks([]byte(sample), "Quickstart")
	if err != nil {
		t.Fatal(err)
	}
	var only []string
	for _, b := range blocks {
		only = append(only, b.Only)
	}
	if got, want := strings.Join(only, ","), "first,,root,user,"; got != want {
		t.Fatalf("markers %q, want %q", got, want)
	}
	if got, want := Script(blocks, "root"), "# block at line 6\nscripts/run -p \"x\" |\n  cat\n# block at line 14\necho inner\n# block at line 23\necho root\n# block at line 35\necho both\n"; got != want {
		t.Errorf("root's script:\n%s\nwant:\n%s", got, want)
	}
	if got := Script(blocks, "user"); !strings.Contains(got, "echo user") || strings.Contains(got, "echo root") || strings.Contains(got, "scripts/test") || strings.Contains(got, "echo next") {
		t.Errorf("user's script:\n%s", got)
	}
}

func TestBlocksErrors(t *testing.T) {
	for _, tc := range []struct{ md, heading, want string }{
		{sample, "Missing", "no section"},
		{"## Empty\n\ntext\n## Other\n```sh\nx\n```\n", "Empty", "no sh block"},
		{"## S\n<!-- readme-test: admin -->\n```sh\nx\n```\n", "S", "unknown marker"},
	} {
		if _, err := Blocks([]byte(tc.md), tc.heading); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.heading, err, tc.want)
		}
	}
}
