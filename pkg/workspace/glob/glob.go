// Package glob matches slash-separated paths against glob patterns with the
// usual extensions of code tools: "**" for any number of directories and
// "{a,b}" alternatives, on top of path.Match's "*", "?" and "[...]", whose
// classes may be negated with "!" as in a shell (or "^").
//
// It is used for the workspace's deny patterns, permission rules and the
// Glob tool. It does no I/O.
//
// # Why not github.com/bmatcuk/doublestar
//
// doublestar is the maintained matcher with the same syntax, and this
// package was checked against it (v4.10.4, on these tests and on a few
// hundred thousand random patterns and paths). Where both apply they agree
// on everyday patterns, but it cannot replace this one:
//
//   - It has no rule for dot files: "*" matches ".env" and "**/*.go"
//     matches "a/.git/x.go". The Glob tool, like a shell, leaves dot files
//     out unless the pattern names them (MatchDot turns that off for deny
//     lists and permission rules, which must see every file).
//   - It cannot tell whether anything below a directory may match
//     (MatchPrefix), which the Glob tool's walk uses to skip subtrees; its
//     own walk reads an fs.FS, not the workspace's traversal-safe access.
//   - Its results differ on some patterns a deny list could hold: a negated
//     class matches the separator ("[^?]" matches "/"), "x***" does not
//     match "x" although "x*" does, and "b*/**" does not match "b"
//     although "src/**" matches "src".
//   - It does not bound brace alternatives; this package refuses a pattern
//     with more than 1024 (see maxAlternatives).
package glob

import (
	"fmt"
	"path"
	"strings"
)

// Pattern is a compiled glob pattern. Its zero value matches nothing.
type Pattern struct {
	src  string
	alts [][]string // one segment list per brace alternative
	// lits holds, per alternative, a run of plain characters every
	// matching path contains ("" if none): a cheap test that rules most
	// paths out before the segments are matched.
	lits []string
	dot  bool
}

// Option changes how a Pattern matches.
type Option func(*Pattern)

// MatchDot makes wildcards and "**" match names that start with a dot. By
// default, as in a shell, a dot file matches only a segment that itself
// starts with a dot.
func MatchDot() Option { return func(p *Pattern) { p.dot = true } }

// maxAlternatives bounds brace expansion, so that a hostile pattern such as
// "{a,b}{a,b}..." cannot exhaust memory.
const maxAlternatives = 1024

// Compile parses pattern. Segments are separated by "/"; a leading "/"
// anchors the pattern at the file system root, which Match expects paths to
// share.
func Compile(pattern string, opts ...Option) (*Pattern, error) {
	p := &Pattern{src: pattern}
	for _, o := range opts {
		o(p)
	}
	alts, err := expandBraces(pattern)
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, err)
	}
	for _, a := range alts {
		segs := splitSegments(a)
		for i, s := range segs {
			if s == "**" {
				continue
			}
			segs[i] = shellNegation(s)
			if _, err := path.Match(segs[i], ""); err != nil {
				return nil, fmt.Errorf("glob %q: %w", pattern, err)
			}
		}
		p.alts = append(p.alts, segs)
		p.lits = append(p.lits, requiredLiteral(segs))
	}
	return p, nil
}

// requiredLiteral returns the longest run of characters without glob
// syntax inside one segment of segs. A segment can only match a name that
// contains it, so neither can a path. Only the part of a segment before
// its first character class or escape is read: the rules of classes
// ("[]a]", "[\\]]", "[!a]") and escapes are the matcher's, and a
// shorter literal is only a weaker filter.
func requiredLiteral(segs []string) string {
	best := ""
	for _, seg := range segs {
		if seg == "**" {
			continue
		}
		if k := strings.IndexAny(seg, `[\`); k >= 0 {
			seg = seg[:k]
		}
		for _, run := range strings.FieldsFunc(seg, func(r rune) bool { return r == '*' || r == '?' }) {
			if len(run) > len(best) {
				best = run
			}
		}
	}
	return best
}

// MustCompile is Compile that panics on a bad pattern, for patterns fixed
// in the source.
func MustCompile(pattern string, opts ...Option) *Pattern {
	p, err := Compile(pattern, opts...)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as given.
func (p *Pattern) String() string { return p.src }

// Match reports whether name, a slash-separated path, matches the pattern.
func (p *Pattern) Match(name string) bool {
	if !p.mayMatch(name) {
		return false
	}
	return p.matchSegments(name, splitSegments(name))
}

// mayMatch reports whether name contains the literal of some alternative.
func (p *Pattern) mayMatch(name string) bool {
	for _, lit := range p.lits {
		if strings.Contains(name, lit) {
			return true
		}
	}
	return false
}

func (p *Pattern) matchSegments(name string, segs []string) bool {
	for i, a := range p.alts {
		if strings.Contains(name, p.lits[i]) && p.run(a, segs, false) {
			return true
		}
	}
	return false
}

// Set is a list of patterns matched together; it splits each name once.
type Set []*Pattern

// Match returns the first pattern of s that name matches.
func (s Set) Match(name string) (*Pattern, bool) {
	var segs []string // split once, and only if some pattern may match
	for _, p := range s {
		if !p.mayMatch(name) {
			continue
		}
		if segs == nil {
			segs = splitSegments(name)
		}
		if p.matchSegments(name, segs) {
			return p, true
		}
	}
	return nil, false
}

// MatchPrefix reports whether some path below the directory dir could match
// the pattern. A directory walk uses it to skip subtrees that cannot match.
func (p *Pattern) MatchPrefix(dir string) bool {
	segs := splitSegments(dir)
	for _, a := range p.alts {
		if p.run(a, segs, true) {
			return true
		}
	}
	return false
}

// run simulates the pattern as a small automaton over path segments: a
// state is an index into pat, and "**" may consume a segment and stay put
// or be skipped. With prefix set, any live state after the last segment
// counts as success.
func (p *Pattern) run(pat, segs []string, prefix bool) bool {
	states := make([]bool, len(pat)+1)
	states[0] = true
	closeOver(pat, states)
	next := make([]bool, len(pat)+1)
	for _, seg := range segs {
		clear(next)
		live := false
		for i, on := range states {
			if !on || i == len(pat) {
				continue
			}
			if pat[i] == "**" {
				if p.dot || !strings.HasPrefix(seg, ".") {
					next[i] = true
					live = true
				}
				continue
			}
			if p.matchSegment(pat[i], seg) {
				next[i+1] = true
				live = true
			}
		}
		if !live {
			return false
		}
		closeOver(pat, next)
		states, next = next, states
	}
	if prefix {
		for _, on := range states {
			if on {
				return true
			}
		}
		return false
	}
	return states[len(pat)]
}

// closeOver lets every live "**" also stand for zero segments.
func closeOver(pat []string, states []bool) {
	for i := range pat {
		if states[i] && pat[i] == "**" {
			states[i+1] = true
		}
	}
}

func (p *Pattern) matchSegment(pat, seg string) bool {
	if !p.dot && strings.HasPrefix(seg, ".") && !strings.HasPrefix(pat, ".") {
		return false
	}
	ok, _ := path.Match(pat, seg)
	return ok
}

// shellNegation rewrites the shell's negated class "[!...]" as path.Match's
// "[^...]". Escaped brackets stay as they are, and so does a "!" anywhere
// but first in a class. (path.Match refuses a "]" first in a class, so the
// first "]" ends one.)
func shellNegation(seg string) string {
	if !strings.Contains(seg, "[!") {
		return seg
	}
	b := []byte(seg)
	inClass := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\\':
			i++
		case !inClass && b[i] == '[':
			inClass = true
			if i+1 < len(b) && b[i+1] == '!' {
				b[i+1] = '^'
				i++
			}
		case inClass && b[i] == ']':
			inClass = false
		}
	}
	return string(b)
}

// splitSegments splits a path into its non-empty segments; a leading "/"
// becomes an empty first segment so that absolute patterns only match
// absolute paths.
func splitSegments(s string) []string {
	var out []string
	if strings.HasPrefix(s, "/") {
		out = append(out, "")
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg != "" && seg != "." {
			out = append(out, seg)
		}
	}
	return out
}

// StaticPrefix returns the leading directories of pattern that contain no
// wildcard, and the rest. A walk can start at the prefix instead of the
// top. "src/**/*.go" gives ("src", "**/*.go").
func StaticPrefix(pattern string) (prefix, rest string) {
	segs := strings.Split(pattern, "/")
	i := 0
	for ; i < len(segs)-1; i++ {
		if strings.ContainsAny(segs[i], `*?[{\`) {
			break
		}
	}
	prefix = strings.Join(segs[:i], "/")
	if prefix == "" && strings.HasPrefix(pattern, "/") {
		prefix = "/"
	}
	return prefix, strings.Join(segs[i:], "/")
}

// HasMeta reports whether s contains any glob syntax.
func HasMeta(s string) bool { return strings.ContainsAny(s, `*?[{\`) }

// expandBraces turns "a{b,c}d" into ["abd", "acd"], recursively, leaving
// escaped braces alone.
func expandBraces(s string) ([]string, error) {
	open := -1
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched }")
			}
			depth--
			if depth > 0 {
				continue
			}
			var out []string
			for _, choice := range splitTopLevel(s[open+1 : i]) {
				rest, err := expandBraces(choice + s[i+1:])
				if err != nil {
					return nil, err
				}
				for _, r := range rest {
					out = append(out, s[:open]+r)
					if len(out) > maxAlternatives {
						return nil, fmt.Errorf("more than %d brace alternatives", maxAlternatives)
					}
				}
			}
			return out, nil
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unmatched {")
	}
	return []string{s}, nil
}

// splitTopLevel splits s at commas that are not inside nested braces.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
