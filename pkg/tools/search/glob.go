package search

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
	"github.com/toolwire/toolwire/pkg/workspace/glob"
)

// DefaultGlobLimit is how many paths Glob returns at most.
const DefaultGlobLimit = 100

// Glob is the Glob tool: file paths matching a pattern, newest first.
type Glob struct {
	// Limit caps the number of paths returned; zero means DefaultGlobLimit.
	Limit int
}

var _ tool.Tool = (*Glob)(nil)

type globInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

// Spec describes Glob.
func (g *Glob) Spec() tool.Spec {
	return tool.Spec{
		Name:        "Glob",
		Description: globDescription,
		InputSchema: json.RawMessage(globSchema),
		ReadOnly:    true,
		Concurrency: tool.ConcurrencyAlways,
	}
}

// ConcurrencySafe reports true: Glob only reads.
func (g *Glob) ConcurrencySafe(json.RawMessage) bool { return true }

// Validate checks the directory and the pattern.
func (g *Glob) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, _, err := g.prepare(env, input)
	return err
}

func (g *Glob) prepare(env *tool.Env, input json.RawMessage) (workspace.Path, *glob.Pattern, error) {
	var in globInput
	if err := decode(input, &in); err != nil {
		return workspace.Path{}, nil, err
	}
	dir, pattern := in.Path, strings.TrimPrefix(in.Pattern, "./")
	if filepath.IsAbs(pattern) {
		// "/src/app/**/*.go": search /src/app for "**/*.go".
		dir, pattern = glob.StaticPrefix(pattern)
	}
	root, fi, err := searchRoot(env, dir, func(abs string) string {
		return fmt.Sprintf("Directory does not exist: %s. Note: your current working directory is %s.", abs, env.Cwd())
	})
	if err != nil {
		return root, nil, err
	}
	if !fi.IsDir() {
		return root, nil, tool.Invalid(fmt.Sprintf("Path is not a directory: %s. Give a directory as path, and the file names to look for as pattern.", root.Abs))
	}
	compiled, err := glob.Compile(pattern)
	if err != nil {
		return root, nil, tool.Invalid(fmt.Sprintf("Invalid glob pattern %q: %v", in.Pattern, err))
	}
	return root, compiled, nil
}

// Run lists the matching files.
func (g *Glob) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	root, pattern, err := g.prepare(env, call.Input)
	if err != nil {
		return failed(err)
	}
	type match struct {
		rel   string
		mtime time.Time
	}
	var matches []match
	err = env.Files.Walk(ctx, root, func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			if !pattern.MatchPrefix(rel) {
				return fs.SkipDir
			}
			return nil
		}
		if pattern.Match(rel) {
			m := match{rel: rel}
			if info, err := d.Info(); err == nil {
				m.mtime = info.ModTime()
			}
			matches = append(matches, m)
		}
		return nil
	})
	if err != nil {
		return failed(asToolError(err))
	}
	if len(matches) == 0 {
		return tool.Text("No files found")
	}
	slices.SortFunc(matches, func(a, b match) int {
		return cmp.Or(b.mtime.Compare(a.mtime), strings.Compare(a.rel, b.rel))
	})
	limit := g.Limit
	if limit <= 0 {
		limit = DefaultGlobLimit
	}
	page, cut := pageOf(matches, 0, limit)
	lines := make([]string, 0, len(page)+1)
	cwd := env.Cwd()
	for _, m := range page {
		lines = append(lines, display(filepath.Join(root.Abs, m.rel), cwd))
	}
	if cut {
		lines = append(lines, fmt.Sprintf("(Results are truncated: these are the %d most recently modified of %d matches. Narrow the path or the pattern to see the others.)", len(page), len(matches)))
	}
	return tool.Text(strings.Join(lines, "\n"))
}
