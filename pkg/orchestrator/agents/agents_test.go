package agents_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       agents.Definition
		bad        bool
	}{
		{"string tools", "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep,Glob\nmodel: inherit\n---\nYou review code.\n\nBe terse.\n",
			agents.Definition{Name: "reviewer", Description: "Reviews code", Tools: []string{"Read", "Grep", "Glob"}, Prompt: "You review code.\n\nBe terse."}, false},
		{"list tools and a model", "---\r\nname: a\r\ndescription: d\r\ntools: [Read, Bash]\r\nmodel: claude-x\r\n---\r\nbody",
			agents.Definition{Name: "a", Description: "d", Tools: []string{"Read", "Bash"}, Model: "claude-x", Prompt: "body"}, false},
		{"no tools: all", "---\nname: a\ndescription: d\n---\n", agents.Definition{Name: "a", Description: "d"}, false},
		{"no front matter", "name: a\n", agents.Definition{}, true},
		{"no name", "---\ndescription: d\n---\nx", agents.Definition{}, true},
		{"no description", "---\nname: a\n---\nx", agents.Definition{}, true},
		{"unclosed", "---\nname: a\ndescription: d\n", agents.Definition{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agents.Parse([]byte(tc.file))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v", err)
			}
			if tc.bad {
				return
			}
			if got.Name != tc.want.Name || got.Description != tc.want.Description || got.Model != tc.want.Model ||
				got.Prompt != tc.want.Prompt || !slices.Equal(got.Tools, tc.want.Tools) || (got.Tools == nil) != (tc.want.Tools == nil) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLoadAndSet(t *testing.T) {
	user, project := t.TempDir(), t.TempDir()
	write := func(dir, name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(user, "r.md", "---\nname: reviewer\ndescription: user's\n---\nuser")
	write(project, "r.md", "---\nname: reviewer\ndescription: project's\ntools: Read\n---\nproject")
	write(project, "broken.md", "no front matter")
	write(project, "notes.txt", "---\nname: ignored\ndescription: d\n---\n")
	defs := agents.Load(slog.New(slog.DiscardHandler), user, project, filepath.Join(project, "missing"))
	if len(defs) != 1 || defs[0].Description != "project's" || defs[0].Prompt != "project" {
		t.Fatalf("loaded %+v", defs)
	}
	set := agents.NewSet(defs)
	if got := set.Names(); !slices.Equal(got, []string{agents.GeneralPurpose, agents.Explore, "reviewer"}) {
		t.Fatalf("names %v", got)
	}
	offered := []string{"Agent", "Bash", "Edit", "Glob", "Grep", "Read", "TaskList", "Write", "mcp__x__y"}
	for _, tc := range []struct {
		agent string
		want  []string
	}{
		{"", []string{"Bash", "Edit", "Glob", "Grep", "Read", "TaskList", "Write", "mcp__x__y"}},
		{agents.Explore, []string{"Glob", "Grep", "Read", "TaskList"}},
		{"reviewer", []string{"Read"}},
	} {
		d, ok := set.Lookup(tc.agent)
		if !ok {
			t.Fatalf("no agent %q", tc.agent)
		}
		if got := agents.ToolsFor(d, offered); !slices.Equal(got, tc.want) {
			t.Errorf("%q: tools %v, want %v", tc.agent, got, tc.want)
		}
	}
	if _, ok := set.Lookup("nope"); ok {
		t.Fatal("found an agent that does not exist")
	}
}
