package deps

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEveryPackage keeps the README's "Repository layout"
// section in step with the packages: each package of the module outside
// gen/ is named there, by its path or, below a parent that is named, by
// its last element.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Repository layout")
	if !ok {
		t.Fatal(`README.md has no "## Repository layout" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}

	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "../../...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	checked := 0
	for _, p := range strings.Fields(string(out)) {
		r, ok := rel(p)
		if !ok || strings.HasPrefix(r, "gen/") || strings.HasPrefix(r, "examples/") {
			continue
		}
		checked++
		if names(section, r) || names(section, path.Dir(r)) && names(section, path.Base(r)) {
			continue
		}
		t.Errorf("README.md's layout section does not name %s: add a line saying what it is for", r)
	}
	if checked < 30 {
		t.Fatalf("go list gave only %d packages of the module", checked)
	}
}

// names reports whether text names the package path (or path element) p
// as a word of its own, so that pkg/note does not pass for pkg/notebook.
func names(text, p string) bool {
	return regexp.MustCompile(`(^|[\s,(])` + regexp.QuoteMeta(p) + `($|[\s,/:)])`).MatchString(text)
}

// TestLargePackagesSayWhy holds every package outside gen/ with more than
// about 500 lines of non-test code to a paragraph in its doc comment that
// begins "Why one package", saying why it is not split.
func TestLargePackagesSayWhy(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", "../../...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	large := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.SplitN(line, "\t", 3)
		if len(fields) != 3 {
			t.Fatalf("go list line %q", line)
		}
		r, ok := rel(fields[0])
		if !ok || strings.HasPrefix(r, "gen/") {
			continue
		}
		lines, says := 0, false
		for _, name := range strings.Fields(fields[2]) {
			src, err := os.ReadFile(path.Join(fields[1], name))
			if err != nil {
				t.Fatal(err)
			}
			lines += bytes.Count(src, []byte("\n"))
			head, _, _ := strings.Cut(string(src), "\npackage ")
			says = says || strings.Contains(head, "// Why one package")
		}
		if lines <= 500 {
			continue
		}
		large++
		if !says {
			t.Errorf("%s has %d lines of non-test code and its doc comment does not say why it is one package (a paragraph beginning \"Why one package\")", r, lines)
		}
	}
	if large == 0 {
		t.Fatal("no package over 500 lines: the count is wrong")
	}
}
