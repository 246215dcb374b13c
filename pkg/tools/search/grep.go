package search

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// DefaultHeadLimit is how many lines or entries Grep returns when the
// call gives no head_limit.
const DefaultHeadLimit = 250

// maxColumns is the longest line Grep shows whole; longer ones are cut to
// a preview by ripgrep.
const maxColumns = 500

// Grep is the Grep tool: ripgrep over the workspace.
type Grep struct {
	// Rg is the ripgrep binary: a path, or a name looked up in PATH. Empty
	// means "rg".
	Rg string
}

var _ tool.Tool = (*Grep)(nil)

type grepInput struct {
	Pattern    string   `json:"pattern"`
	Path       string   `json:"path"`
	Glob       string   `json:"glob"`
	OutputMode string   `json:"output_mode"`
	Before     *float64 `json:"-B"`
	After      *float64 `json:"-A"`
	Context    *float64 `json:"-C"`
	ContextAlt *float64 `json:"context"`
	LineNumber *bool    `json:"-n"`
	IgnoreCase bool     `json:"-i"`
	OnlyMatch  bool     `json:"-o"`
	Type       string   `json:"type"`
	HeadLimit  *float64 `json:"head_limit"`
	Offset     *float64 `json:"offset"`
	Multiline  bool     `json:"multiline"`
}

// Spec describes Grep.
func (g *Grep) Spec() tool.Spec {
	return tool.Spec{
		Name:        "Grep",
		Description: grepDescription,
		InputSchema: json.RawMessage(grepSchema),
		ReadOnly:    true,
		Concurrency: tool.ConcurrencyAlways,
	}
}

// ConcurrencySafe reports true: Grep only reads.
func (g *Grep) ConcurrencySafe(json.RawMessage) bool { return true }

// Validate checks that the path exists inside the workspace.
func (g *Grep) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, _, _, err := g.prepare(env, input)
	return err
}

func (g *Grep) prepare(env *tool.Env, input json.RawMessage) (grepInput, workspace.Path, fs.FileInfo, error) {
	var in grepInput
	if err := decode(input, &in); err != nil {
		return in, workspace.Path{}, nil, err
	}
	switch in.OutputMode {
	case "":
		in.OutputMode = "files_with_matches"
	case "files_with_matches", "content", "count":
	default:
		return in, workspace.Path{}, nil, tool.Invalid(fmt.Sprintf("output_mode must be content, files_with_matches or count, not %q.", in.OutputMode))
	}
	root, fi, err := searchRoot(env, in.Path, func(abs string) string {
		return fmt.Sprintf("Path does not exist: %s. Note: your current working directory is %s.", abs, env.Cwd())
	})
	return in, root, fi, err
}

// Run searches.
func (g *Grep) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	in, root, fi, err := g.prepare(env, call.Input)
	if err != nil {
		return failed(err)
	}
	rg := cmp.Or(g.Rg, "rg")
	bin, err := exec.LookPath(rg)
	if err != nil {
		return tool.Error(fmt.Sprintf("Grep cannot run: it needs the ripgrep binary (%s), which was not found (%v). Use Bash with grep instead.", rg, err))
	}
	real, err := env.Files.RealPath(root)
	if err != nil {
		return failed(asToolError(err))
	}
	out, err := runRg(ctx, bin, rgArgs(in, real, env.Files.DenyPatterns()), int64(env.Limits.WithDefaults().MaxOutputMemory))
	if err != nil {
		return tool.Error(err.Error())
	}
	s := &results{env: env, real: real, abs: root.Abs, cwd: env.Cwd()}
	offset, limit := intOf(in.Offset, 0), intOf(in.HeadLimit, DefaultHeadLimit)
	var text string
	switch in.OutputMode {
	case "files_with_matches":
		text = s.files(out.data, offset, limit)
	case "count":
		text = s.counts(out.data, offset, limit)
	default:
		text = s.content(out.data, !fi.IsDir(), in.LineNumber == nil || *in.LineNumber, hasContext(in), offset, limit)
	}
	if out.truncated {
		text += fmt.Sprintf("\n\n[ripgrep produced more than %s of output; the search was stopped there. Narrow the pattern, path, glob or type.]", formatBytes(env.Limits.WithDefaults().MaxOutputMemory))
	}
	return tool.Text(capChars(text, env.Limits.WithDefaults().MaxOutputChars))
}

// rgArgs builds ripgrep's command line. Paths come back NUL-terminated
// (--null) so that any file name can be parsed.
func rgArgs(in grepInput, target string, deny []string) []string {
	args := []string{"--no-config", "--hidden", "--no-messages", "--null",
		"--max-columns", strconv.Itoa(maxColumns), "--max-columns-preview"}
	for _, vcs := range []string{".git", ".svn", ".hg", ".bzr", ".jj"} {
		args = append(args, "--glob", "!"+vcs)
	}
	for _, d := range deny {
		// Anchored patterns mean nothing to ripgrep, whose globs are
		// relative to the search path; the output filter catches those.
		if strings.HasPrefix(d, "**/") {
			args = append(args, "--glob", "!"+d)
		}
	}
	switch in.OutputMode {
	case "files_with_matches":
		args = append(args, "--files-with-matches")
	case "count":
		args = append(args, "--count", "--with-filename")
	default:
		// Always ask for numbers: they tell match lines (N:) from context
		// lines (N-); they are removed again when -n is false.
		args = append(args, "--line-number")
		if c := firstOf(in.Context, in.ContextAlt); c != nil {
			args = append(args, "--context", strconv.Itoa(max(int(*c), 0)))
		} else {
			if in.Before != nil {
				args = append(args, "--before-context", strconv.Itoa(max(int(*in.Before), 0)))
			}
			if in.After != nil {
				args = append(args, "--after-context", strconv.Itoa(max(int(*in.After), 0)))
			}
		}
		if in.OnlyMatch {
			args = append(args, "--only-matching")
		}
	}
	if in.IgnoreCase {
		args = append(args, "--ignore-case")
	}
	if in.Multiline {
		args = append(args, "--multiline", "--multiline-dotall")
	}
	if in.Type != "" {
		args = append(args, "--type", in.Type)
	}
	for _, g := range splitGlobs(in.Glob) {
		args = append(args, "--glob", g)
	}
	return append(args, "--regexp", in.Pattern, "--", target)
}

func hasContext(in grepInput) bool {
	for _, c := range []*float64{in.Context, in.ContextAlt, in.Before, in.After} {
		if c != nil && *c > 0 {
			return true
		}
	}
	return false
}

func firstOf(vs ...*float64) *float64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// intOf returns *v as an int, or def when v is nil or negative.
func intOf(v *float64, def int) int {
	if v == nil || *v < 0 {
		return def
	}
	return int(*v)
}

// splitGlobs splits the glob parameter into ripgrep globs: at spaces, and
// at commas outside braces ("*.{ts,tsx}" stays whole).
func splitGlobs(s string) []string {
	var out []string
	for _, field := range strings.Fields(s) {
		depth, start := 0, 0
		for i, c := range field {
			switch c {
			case '{':
				depth++
			case '}':
				depth--
			case ',':
				if depth == 0 {
					out = appendNonEmpty(out, field[start:i])
					start = i + 1
				}
			}
		}
		out = appendNonEmpty(out, field[start:])
	}
	return out
}

func appendNonEmpty(out []string, s string) []string {
	if s != "" {
		out = append(out, s)
	}
	return out
}

// rgOutput is what ripgrep printed.
type rgOutput struct {
	data      []byte
	truncated bool // more than the cap was printed; ripgrep was stopped
}

// runRg runs ripgrep and returns its standard output, at most limit bytes
// of it. Exit status 1 (no match) is not an error; status 2 is one only
// when nothing was found, as ripgrep also uses it for unreadable files.
func runRg(ctx context.Context, bin string, args []string, limit int64) (rgOutput, error) {
	if cerr := context.Cause(ctx); cerr != nil {
		return rgOutput{}, fmt.Errorf("grep: interrupted: %w", cerr)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(runCtx, bin, args...)
	cmd.Env = []string{} // nothing from our environment: no RIPGREP_CONFIG_PATH, no secrets
	cmd.WaitDelay = 2 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &capped{buf: &stderr, limit: 16 << 10}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return rgOutput{}, fmt.Errorf("grep: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return rgOutput{}, fmt.Errorf("grep: start ripgrep: %w", err)
	}
	data, readErr := io.ReadAll(io.LimitReader(stdout, limit+1))
	out := rgOutput{data: data}
	if int64(len(data)) > limit {
		out.data, out.truncated = data[:limit], true
		stop() // enough: kill ripgrep rather than read on
	}
	err = cmd.Wait()
	if cerr := context.Cause(ctx); cerr != nil {
		return rgOutput{}, fmt.Errorf("grep: interrupted: %w", cerr)
	}
	if readErr != nil && !out.truncated {
		return rgOutput{}, fmt.Errorf("grep: read ripgrep output: %w", readErr)
	}
	var exit *exec.ExitError
	switch {
	case err == nil, out.truncated:
	case errors.As(err, &exit) && exit.ExitCode() == 1:
	case errors.As(err, &exit) && exit.ExitCode() == 2 && len(out.data) > 0:
	default:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return rgOutput{}, fmt.Errorf("%s", msg)
	}
	return out, nil
}

// capped is a writer that keeps the first limit bytes and drops the rest.
type capped struct {
	buf   *bytes.Buffer
	limit int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// results turns ripgrep's output into the tool's text.
type results struct {
	env  *tool.Env
	real string // the path ripgrep searched, links resolved
	abs  string // the same path as the model named it
	cwd  string
}

// name maps a path printed by ripgrep to the path shown to the model, or
// "" when a deny pattern covers it.
func (s *results) name(printed string) string {
	lexical := s.abs + strings.TrimPrefix(printed, s.real)
	if _, denied := s.env.Files.Denied(printed); denied {
		return ""
	}
	if _, denied := s.env.Files.Denied(lexical); denied {
		return ""
	}
	return display(lexical, s.cwd)
}

// files renders files_with_matches: newest first.
func (s *results) files(out []byte, offset, limit int) string {
	type file struct {
		name  string
		mtime time.Time
	}
	var files []file
	for printed := range strings.SplitSeq(string(out), "\x00") {
		if printed == "" {
			continue
		}
		f := file{name: s.name(printed)}
		if f.name == "" {
			continue
		}
		// Only a time stamp of a path ripgrep itself found under the
		// checked root: no need to go through the workspace.
		if fi, err := os.Lstat(printed); err == nil {
			f.mtime = fi.ModTime()
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return "No files found"
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(b.mtime.Compare(a.mtime), strings.Compare(a.name, b.name))
	})
	page, cut := pageOf(files, offset, limit)
	lines := make([]string, len(page))
	for i, f := range page {
		lines[i] = f.name
	}
	return fmt.Sprintf("Found %d %s\n", len(files), plural(len(files), "file", "files")) +
		strings.Join(lines, "\n") + pageNote(cut, len(page), len(files), "files", offset)
}

// counts renders count mode: matching lines per file, by path.
func (s *results) counts(out []byte, offset, limit int) string {
	type count struct {
		name string
		n    int
	}
	var counts []count
	total := 0
	for _, rec := range rgRecords(string(out), s.real) {
		n, err := strconv.Atoi(rec.rest)
		name := s.name(rec.path)
		if err != nil || name == "" {
			continue
		}
		counts = append(counts, count{name, n})
		total += n
	}
	if len(counts) == 0 {
		return "No matches found"
	}
	slices.SortFunc(counts, func(a, b count) int { return strings.Compare(a.name, b.name) })
	page, cut := pageOf(counts, offset, limit)
	lines := make([]string, len(page))
	for i, c := range page {
		lines[i] = c.name + ":" + strconv.Itoa(c.n)
	}
	return strings.Join(lines, "\n") +
		fmt.Sprintf("\n\nFound %d total %s across %d %s.", total, plural(total, "occurrence", "occurrences"), len(counts), plural(len(counts), "file", "files")) +
		pageNote(cut, len(page), len(counts), "files", offset)
}

// content renders content mode. ripgrep prints "path\0N:text" for match
// lines, "path\0N-text" for context lines and "--" between groups; a single
// file searched directly comes without the path. Files are put in path
// order; the lines become "path:N:text" (or "path-N-text" for context).
func (s *results) content(out []byte, singleFile, numbers, context bool, offset, limit int) string {
	text := strings.TrimSuffix(string(out), "\n")
	if text == "" {
		return "No matches found"
	}
	var lines []string
	if singleFile {
		for l := range strings.SplitSeq(text, "\n") {
			lines = append(lines, formatLine("", l, numbers))
		}
	} else {
		lines = s.groupByFile(text, numbers, context)
	}
	if len(lines) == 0 {
		return "No matches found"
	}
	page, cut := pageOf(lines, offset, limit)
	return strings.Join(page, "\n") + pageNote(cut, len(page), len(lines), "lines", offset)
}

func (s *results) groupByFile(text string, numbers, context bool) []string {
	blocks := make(map[string][]string)
	var order []string
	current, pendingSep := "", false
	for _, rec := range rgRecords(text+"\n", s.real) {
		if rec.sep {
			pendingSep = true
			continue
		}
		rest := rec.rest
		name := s.name(rec.path)
		if name == "" {
			continue
		}
		if _, seen := blocks[name]; !seen {
			order = append(order, name)
		} else if pendingSep && name == current {
			blocks[name] = append(blocks[name], "--")
		}
		blocks[name] = append(blocks[name], formatLine(name, rest, numbers))
		current, pendingSep = name, false
	}
	slices.Sort(order)
	var lines []string
	for i, name := range order {
		if i > 0 && context {
			lines = append(lines, "--")
		}
		lines = append(lines, blocks[name]...)
	}
	return lines
}

// rgRecord is one line of ripgrep's --null output: a path and the rest of
// its line, or a "--" line between groups of context.
type rgRecord struct {
	path, rest string
	sep        bool
}

// rgRecords splits ripgrep's --null output into records. A path ends at
// its NUL and may hold newlines, so lines cannot be split at newlines
// first: each record is read as a path up to its NUL, then the rest up to
// the newline. Every path starts with root, the absolute path ripgrep
// searched; text before it that is not a path (a match that spans lines)
// belongs to the record before. A record cut off at the end (output past
// its cap) is dropped.
func rgRecords(out, root string) []rgRecord {
	var recs []rgRecord
	for len(out) > 0 {
		if strings.HasPrefix(out, "--\n") {
			recs = append(recs, rgRecord{sep: true})
			out = out[3:]
			continue
		}
		nul := strings.IndexByte(out, 0)
		if nul < 0 {
			break
		}
		chunk := out[:nul]
		if !strings.HasPrefix(chunk, root) {
			i := strings.Index(chunk, "\n"+root)
			if i < 0 {
				break
			}
			if n := len(recs); n > 0 && !recs[n-1].sep {
				recs[n-1].rest += "\n" + chunk[:i]
			}
			chunk = chunk[i+1:]
		}
		rest := out[nul+1:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		recs = append(recs, rgRecord{path: chunk, rest: rest[:nl]})
		out = rest[nl+1:]
	}
	return recs
}

// formatLine turns ripgrep's "N:text" or "N-text" into the shown line:
// "path:N:text", "path:text", "N:text" or "text".
func formatLine(name, rest string, numbers bool) string {
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	sep := ":"
	num, body := "", rest
	if i > 0 && i < len(rest) && (rest[i] == ':' || rest[i] == '-') {
		num, sep, body = rest[:i], rest[i:i+1], rest[i+1:]
	}
	var b strings.Builder
	if name != "" {
		b.WriteString(name)
		b.WriteString(sep)
	}
	if numbers && num != "" {
		b.WriteString(num)
		b.WriteString(sep)
	}
	b.WriteString(body)
	return b.String()
}

// pageNote tells the model that head_limit or offset left entries out.
func pageNote(cut bool, shown, total int, what string, offset int) string {
	if !cut {
		return ""
	}
	next := offset + shown
	if next >= total {
		return fmt.Sprintf("\n\n[Showing %d of %d %s, from offset %d.]", shown, total, what, offset)
	}
	return fmt.Sprintf("\n\n[Showing %d of %d %s, from offset %d. Call again with offset=%d for more, or narrow the search.]", shown, total, what, offset, next)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// capChars shortens text to at most limit characters, at a line end, and
// says so.
func capChars(text string, limit int) string {
	if limit <= 0 || len(text) <= limit {
		return text
	}
	cut := strings.LastIndexByte(text[:limit], '\n')
	if cut <= 0 {
		cut = limit
	}
	return text[:cut] + fmt.Sprintf("\n\n[Output cut at %d of %d characters. Use head_limit and offset to page through the rest, or narrow the search.]", cut, len(text))
}

func formatBytes(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + " MiB"
	}
	return strconv.Itoa(n) + " bytes"
}
