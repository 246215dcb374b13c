package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/hook"

	"github.com/toolwire/toolwire/pkg/permission"
)

// Settings are the permission and hook settings of one file or session.
type Settings struct {
	// Permissions are the rules and mode.
	Permissions Permissions
	// Hooks are the hook matchers of each event, in file order.
	Hooks map[Event][]HookMatcher
	// Sandbox is what the "sandbox" object says about the file system.
	Sandbox Sandbox
	// Env is the "env" object: variables Claude Code sets for its session.
	// toolwire reads from it only the variables of its limits (pkg/ccenv);
	// a number or boolean is kept as its JSON text.
	Env map[string]string
}

// Sandbox is the part of Claude Code's "sandbox" object that toolwire's
// sandbox honours: the lists of "sandbox.filesystem" and of
// "sandbox.network". Paths are kept as written ("//abs", "/abs",
// "~/in/home", "relative"); Resolve makes them absolute. The executor's
// configuration applies the file system lists (pkg/execsvc); they concern
// the executor that runs in-process, or the one whose own settings file
// holds them, never a session's settings on the wire. The network lists
// are the operator's allowlist in the executor's own settings, and travel
// with a session's settings too, where they narrow it.
type Sandbox struct {
	// AllowWrite are further paths processes may write (each with what
	// lies beneath), besides the workspace, the temp dir, --add-dir
	// directories and the tool caches.
	AllowWrite []string
	// DenyWrite are paths processes must not write. They hold unless one
	// lies in a directory processes may write: Landlock cannot take a
	// right back from part of a granted directory, so such a session is
	// refused.
	DenyWrite []string
	// DenyRead are deny patterns added to the executor's deny list: file
	// tools refuse them and processes can neither read nor write them.
	DenyRead []string
	// AllowRead are paths taken out of the deny list: a deny pattern that
	// names a path at or beneath one of them is dropped. Processes may
	// read them too (which matters outside the development profile).
	AllowRead []string
	// Network is "sandbox.network".
	Network Network
}

// Network is "sandbox.network": the hosts processes may reach through the
// egress proxy of an executor whose network is "allowlist" (see
// pkg/egress for the entries' form: "example.com", "*.example.com",
// "*", each optionally ":PORT").
type Network struct {
	// AllowedDomains is "allowedDomains". Nil means the key is absent:
	// in a session's settings, the executor's allowlist applies as it is;
	// empty (the key with no entries) means no host.
	AllowedDomains []string
	// DeniedDomains is "deniedDomains": never reached, whatever allows
	// them.
	DeniedDomains []string
}

// Merge returns n with the lists of o appended; AllowedDomains stays nil
// only when both are.
func (n Network) Merge(o Network) Network {
	out := Network{DeniedDomains: slices.Concat(n.DeniedDomains, o.DeniedDomains)}
	if n.AllowedDomains != nil || o.AllowedDomains != nil {
		out.AllowedDomains = append(append([]string{}, n.AllowedDomains...), o.AllowedDomains...)
	}
	return out
}

// Merge returns s with the lists of o appended, as Claude Code merges the
// sandbox lists of its settings files.
func (s Sandbox) Merge(o Sandbox) Sandbox {
	return Sandbox{
		AllowWrite: slices.Concat(s.AllowWrite, o.AllowWrite),
		DenyWrite:  slices.Concat(s.DenyWrite, o.DenyWrite),
		DenyRead:   slices.Concat(s.DenyRead, o.DenyRead),
		AllowRead:  slices.Concat(s.AllowRead, o.AllowRead),
		Network:    s.Network.Merge(o.Network),
	}
}

// Resolve returns s with every path absolute: "//" and "/" start at the
// file system root, "~" and "~/" at home, and anything else is relative to
// base (the project directory). Claude Code reads "/x" in some versions as
// relative to the settings file's directory; "//x" means the root in both.
func (s Sandbox) Resolve(home, base string) Sandbox {
	conv := func(in []string) []string {
		var out []string
		for _, p := range in {
			out = append(out, resolvePath(p, home, base))
		}
		return out
	}
	return Sandbox{AllowWrite: conv(s.AllowWrite), DenyWrite: conv(s.DenyWrite), DenyRead: conv(s.DenyRead), AllowRead: conv(s.AllowRead), Network: s.Network}
}

func resolvePath(p, home, base string) string {
	switch {
	case strings.HasPrefix(p, "//"):
		return "/" + strings.TrimLeft(p, "/")
	case strings.HasPrefix(p, "/"):
		return p
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	}
	return filepath.Join(base, p)
}

// Permissions is the "permissions" object.
type Permissions struct {
	// Allow, Ask and Deny are permission rules.
	Allow, Ask, Deny []string
	// DefaultMode is the permission mode; "" leaves it unset.
	DefaultMode permission.Mode
	// DisableBypass is set by "disableBypassPermissionsMode": "disable".
	DisableBypass bool
}

// Rules returns the permissions as rules for permission.Compile.
func (p Permissions) Rules() permission.Rules {
	return permission.Rules{
		Allow:         append([]string(nil), p.Allow...),
		Ask:           append([]string(nil), p.Ask...),
		Deny:          append([]string(nil), p.Deny...),
		Mode:          p.DefaultMode,
		DisableBypass: p.DisableBypass,
	}
}

// Event is a hook event.
type Event string

// The hook events toolwire runs. Other events of a Claude Code settings
// file are ignored.
const (
	PreToolUse  Event = "PreToolUse"
	PostToolUse Event = "PostToolUse"
)

// Events lists the supported events in pipeline order.
var Events = []Event{PreToolUse, PostToolUse}

// HookMatcher is one entry of an event's list: the tools it applies to and
// the commands to run.
type HookMatcher struct {
	// Matcher selects tools by name; see hook.CompileMatcher.
	Matcher string
	// Hooks are run in parallel when the matcher matches.
	Hooks []HookCommand
}

// HookCommand is one hook command.
type HookCommand struct {
	// Command is run by the shell with the event as JSON on standard input.
	Command string
	// Timeout kills the command after this long; zero means the hook
	// runner's default.
	Timeout time.Duration
}

// Error is a problem in a settings file, with where it is.
type Error struct {
	// File is the file's path; empty for ParseSettings.
	File string
	// Line and Column locate the problem, counting from 1; zero when
	// unknown.
	Line, Column int
	// Field is the path of the offending value, such as
	// "permissions.allow[2]"; empty for a syntax error.
	Field string
	// Err says what is wrong.
	Err error
}

// Error returns "file:line:column: field: problem".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("settings")
	if e.File != "" {
		b.Reset()
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *Error) Unwrap() error { return e.Err }

// LoadSettings reads and parses a settings file.
func LoadSettings(path string) (Settings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: %w", err)
	}
	s, err := ParseSettings(data)
	var se *Error
	if errors.As(err, &se) {
		se.File = path
	}
	return s, err
}

// The shape of the file, as far as it is read.
type fileSettings struct {
	Permissions *filePermissions `json:"permissions"`
	Env         map[string]any   `json:"env"`
	// Other events, with shapes of their own, are not read.
	Hooks struct {
		PreToolUse  []fileMatcher `json:"PreToolUse"`
		PostToolUse []fileMatcher `json:"PostToolUse"`
	} `json:"hooks"`
	// Other keys of "sandbox" (enabled, excludedCommands, the other keys
	// of network, ...) are not read.
	Sandbox struct {
		Filesystem struct {
			AllowWrite []string `json:"allowWrite"`
			DenyWrite  []string `json:"denyWrite"`
			DenyRead   []string `json:"denyRead"`
			AllowRead  []string `json:"allowRead"`
		} `json:"filesystem"`
		Network struct {
			AllowedDomains *[]string `json:"allowedDomains"`
			DeniedDomains  []string  `json:"deniedDomains"`
		} `json:"network"`
	} `json:"sandbox"`
}

type filePermissions struct {
	Allow                        []string `json:"allow"`
	Ask                          []string `json:"ask"`
	Deny                         []string `json:"deny"`
	DefaultMode                  string   `json:"defaultMode"`
	DisableBypassPermissionsMode string   `json:"disableBypassPermissionsMode"`
}

type fileMatcher struct {
	Matcher string     `json:"matcher"`
	Hooks   []fileHook `json:"hooks"`
}

type fileHook struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Timeout *float64 `json:"timeout"`
}

// ParseSettings parses the contents of a settings file. Every problem is
// reported as an *Error with its line and column.
func ParseSettings(data []byte) (Settings, error) {
	var f fileSettings
	if err := json.Unmarshal(data, &f); err != nil {
		return Settings{}, jsonError(data, err)
	}
	var s Settings
	var problems []problem
	if p := f.Permissions; p != nil {
		s.Permissions = Permissions{Allow: p.Allow, Ask: p.Ask, Deny: p.Deny, DefaultMode: permission.Mode(p.DefaultMode)}
		switch p.DisableBypassPermissionsMode {
		case "":
		case "disable":
			s.Permissions.DisableBypass = true
		default:
			problems = append(problems, problem{path: []any{"permissions", "disableBypassPermissionsMode"},
				err: fmt.Errorf(`%q is not a known value; the only one is "disable"`, p.DisableBypassPermissionsMode)})
		}
	}
	for k, v := range f.Env {
		if s.Env == nil {
			s.Env = make(map[string]string, len(f.Env))
		}
		switch v := v.(type) {
		case string:
			s.Env[k] = v
		case float64, bool:
			s.Env[k] = fmt.Sprint(v)
		default:
			problems = append(problems, problem{path: []any{"env", k}, err: fmt.Errorf("the value of %s is not a string", k)})
		}
	}
	fsys := f.Sandbox.Filesystem
	s.Sandbox = Sandbox{AllowWrite: fsys.AllowWrite, DenyWrite: fsys.DenyWrite, DenyRead: fsys.DenyRead, AllowRead: fsys.AllowRead}
	if net := f.Sandbox.Network; net.AllowedDomains != nil || net.DeniedDomains != nil {
		s.Sandbox.Network.DeniedDomains = net.DeniedDomains
		if net.AllowedDomains != nil {
			s.Sandbox.Network.AllowedDomains = append([]string{}, *net.AllowedDomains...)
		}
	}
	for _, ev := range Events {
		matchers := f.Hooks.PreToolUse
		if ev == PostToolUse {
			matchers = f.Hooks.PostToolUse
		}
		for i, m := range matchers {
			hm := HookMatcher{Matcher: m.Matcher}
			for j, h := range m.Hooks {
				at := []any{"hooks", string(ev), i, "hooks", j}
				if h.Type != "command" {
					problems = append(problems, problem{path: append(at, "type"),
						err: fmt.Errorf(`hook type %q is not supported; use "command"`, h.Type)})
				}
				hc := HookCommand{Command: h.Command}
				if h.Timeout != nil {
					if *h.Timeout < 0 || math.IsNaN(*h.Timeout) || *h.Timeout > 86400 {
						problems = append(problems, problem{path: append(at, "timeout"),
							err: fmt.Errorf("timeout %v is not a number of seconds between 0 and 86400", *h.Timeout)})
					} else {
						hc.Timeout = time.Duration(*h.Timeout * float64(time.Second))
					}
				}
				hm.Hooks = append(hm.Hooks, hc)
			}
			if s.Hooks == nil {
				s.Hooks = make(map[Event][]HookMatcher)
			}
			s.Hooks[ev] = append(s.Hooks[ev], hm)
		}
	}
	problems = append(problems, s.problems()...)
	if len(problems) == 0 {
		return s, nil
	}
	// Report the problem that comes first in the file; a missing value,
	// shown where its parent is, only when nothing present is wrong.
	var first *Error
	firstOff, firstMissing := -1, true
	for _, p := range problems {
		off, missing := locate(data, p.path), false
		for n := len(p.path) - 1; n >= 0 && off < 0; n-- {
			off, missing = locate(data, p.path[:n]), true
		}
		better := first == nil ||
			firstMissing && !missing ||
			firstMissing == missing && off >= 0 && (firstOff < 0 || off < firstOff)
		if better {
			first, firstOff, firstMissing = p.at(data, off), off, missing
		}
	}
	if n := len(problems) - 1; n > 0 {
		first.Err = fmt.Errorf("%w (and %d more %s)", first.Err, n, plural(n, "problem", "problems"))
	}
	return Settings{}, first
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Validate checks rules, mode and hooks of settings that did not come from
// a file (from the wire, say). The *Error it returns names the field but
// has no line.
func (s Settings) Validate() error {
	if p := s.problems(); len(p) > 0 {
		return &Error{Field: fieldName(p[0].path), Err: p[0].err}
	}
	return nil
}

// problem is one invalid value and where it is in the file's structure.
type problem struct {
	path []any
	err  error
}

func (s Settings) problems() []problem {
	var out []problem
	lists := []struct {
		key   string
		rules []string
	}{{"allow", s.Permissions.Allow}, {"ask", s.Permissions.Ask}, {"deny", s.Permissions.Deny}}
	for _, l := range lists {
		for i, text := range l.rules {
			if _, err := permission.ParseRule(text); err != nil {
				out = append(out, problem{path: []any{"permissions", l.key, i}, err: fmt.Errorf("rule %q: %w", text, err)})
			}
		}
	}
	if _, err := permission.ParseMode(string(s.Permissions.DefaultMode)); err != nil {
		out = append(out, problem{path: []any{"permissions", "defaultMode"}, err: err})
	}
	for _, ev := range Events {
		for i, m := range s.Hooks[ev] {
			if _, err := hook.CompileMatcher(m.Matcher); err != nil {
				out = append(out, problem{path: []any{"hooks", string(ev), i, "matcher"}, err: err})
			}
			if len(m.Hooks) == 0 {
				out = append(out, problem{path: []any{"hooks", string(ev), i, "hooks"}, err: errors.New("no hook commands")})
			}
			for j, h := range m.Hooks {
				if strings.TrimSpace(h.Command) == "" {
					out = append(out, problem{path: []any{"hooks", string(ev), i, "hooks", j, "command"}, err: errors.New("empty command")})
				}
				if h.Timeout < 0 {
					out = append(out, problem{path: []any{"hooks", string(ev), i, "hooks", j, "timeout"}, err: errors.New("negative timeout")})
				}
			}
		}
	}
	paths := []struct {
		key   string
		paths []string
	}{{"allowWrite", s.Sandbox.AllowWrite}, {"denyWrite", s.Sandbox.DenyWrite}, {"denyRead", s.Sandbox.DenyRead}, {"allowRead", s.Sandbox.AllowRead}}
	for _, l := range paths {
		for i, p := range l.paths {
			if strings.TrimSpace(p) == "" {
				out = append(out, problem{path: []any{"sandbox", "filesystem", l.key, i}, err: errors.New("empty path")})
			}
		}
	}
	domains := []struct {
		key     string
		entries []string
	}{{"allowedDomains", s.Sandbox.Network.AllowedDomains}, {"deniedDomains", s.Sandbox.Network.DeniedDomains}}
	for _, l := range domains {
		for i, e := range l.entries {
			if _, err := egress.ParseRule(e); err != nil {
				out = append(out, problem{path: []any{"sandbox", "network", l.key, i}, err: err})
			}
		}
	}
	for ev := range s.Hooks {
		if ev != PreToolUse && ev != PostToolUse {
			out = append(out, problem{path: []any{"hooks", string(ev)}, err: fmt.Errorf("event %q is not supported", ev)})
		}
	}
	return out
}

// at turns a problem into an *Error with the line and column of off, the
// offset of the offending value (-1 if unknown).
func (p problem) at(data []byte, off int) *Error {
	e := &Error{Field: fieldName(p.path), Err: p.err}
	if off >= 0 {
		e.Line, e.Column = lineColumn(data, off)
	}
	return e
}

// jsonError locates a decoding error.
func jsonError(data []byte, err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off := int(syn.Offset)
		if off > 0 && !strings.HasPrefix(syn.Error(), "unexpected end") {
			off-- // Offset is just past the offending character
		}
		line, col := lineColumn(data, off)
		return &Error{Line: line, Column: col, Err: fmt.Errorf("invalid JSON: %s", syn.Error())}
	case errors.As(err, &typ):
		e := &Error{Field: typ.Field, Err: fmt.Errorf("%s where %s was expected", describeJSON(typ.Value), describeGo(typ.Type.Kind().String()))}
		if e.Field == "" {
			e.Err = fmt.Errorf("the settings must be a JSON object, not %s", describeJSON(typ.Value))
		}
		// Offset is just past the offending value; find where it starts.
		if off := valueStart(data, int(typ.Offset)); off >= 0 {
			e.Line, e.Column = lineColumn(data, off)
		}
		return e
	}
	return &Error{Err: err}
}

func describeJSON(v string) string {
	switch v {
	case "object", "array", "string", "number", "bool":
		return "a JSON " + v
	}
	return v
}

func describeGo(kind string) string {
	switch kind {
	case "slice":
		return "a list"
	case "string":
		return "a string"
	case "float64":
		return "a number"
	case "struct", "map", "ptr":
		return "an object"
	}
	return kind
}

// fieldName renders a path as "permissions.allow[2]".
func fieldName(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	return b.String()
}

// lineColumn converts a byte offset to a 1-based line and column
// (counting characters).
func lineColumn(data []byte, off int) (int, int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// locate returns the byte offset where the value at path starts, or -1.
func locate(data []byte, path []any) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := skipSeparators(data, int(dec.InputOffset()))
		if len(path) == 0 {
			return start
		}
		tok, err := dec.Token()
		if err != nil {
			return -1
		}
		delim, ok := tok.(json.Delim)
		if !ok {
			return -1
		}
		found := false
		switch want := path[0].(type) {
		case string:
			if delim != '{' {
				return -1
			}
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return -1
				}
				if key == want {
					found = true
					break
				}
				if skipValue(dec) != nil {
					return -1
				}
			}
		case int:
			if delim != '[' {
				return -1
			}
			for i := 0; dec.More(); i++ {
				if i == want {
					found = true
					break
				}
				if skipValue(dec) != nil {
					return -1
				}
			}
		}
		if !found {
			return -1
		}
		path = path[1:]
	}
}

func skipValue(dec *json.Decoder) error {
	var raw json.RawMessage
	return dec.Decode(&raw)
}

// skipSeparators skips white space, ':' and ',' from off.
func skipSeparators(data []byte, off int) int {
	for off < len(data) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ':', ',':
			off++
		default:
			return off
		}
	}
	return off
}

// valueStart finds the start of the JSON value that ends just before end.
func valueStart(data []byte, end int) int {
	end = min(end, len(data))
	if end <= 0 {
		return -1
	}
	// Scan values from the start, remembering the one that ends at end.
	dec := json.NewDecoder(bytes.NewReader(data))
	best := -1
	for {
		start := skipSeparators(data, int(dec.InputOffset()))
		if start >= end {
			return best
		}
		if _, err := dec.Token(); err != nil {
			return best
		}
		best = start
		if int(dec.InputOffset()) >= end {
			return best
		}
	}
}
