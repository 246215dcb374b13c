package permission

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolwire/toolwire/pkg/bashcmd"
	"github.com/toolwire/toolwire/pkg/workspace/glob"
)

// Rule is one parsed permission rule.
type Rule struct {
	// Text is the rule as written.
	Text string
	// Tool is the tool the rule names.
	Tool string
	// Specifier is the text between the parentheses; empty when the rule
	// names the whole tool.
	Specifier string

	kind   ruleKind
	bash   *bashPattern
	path   *pathPattern
	domain string
}

type ruleKind int

const (
	kindTool   ruleKind = iota // the whole tool
	kindBash                   // a Bash command pattern
	kindPath                   // a path pattern of a file tool
	kindDomain                 // WebFetch(domain:…)
	kindOther                  // a specifier this package cannot interpret
)

// Tool families: rules naming Edit cover every tool that changes files,
// rules naming Read every tool that reads them.
var (
	editTools = []string{"Edit", "Write", "NotebookEdit", "MultiEdit"}
	readTools = []string{"Read", "Glob", "Grep", "NotebookRead"}
)

// aliases maps older tool names to the names rules and requests use.
var aliases = map[string]string{
	"BashOutput": "TaskOutput",
	"KillShell":  "TaskStop",
	"KillBash":   "TaskStop",
}

func canonicalTool(name string) string {
	if c, ok := aliases[name]; ok {
		return c
	}
	return name
}

func isEditTool(name string) bool { return contains(editTools, name) }
func isReadTool(name string) bool { return contains(readTools, name) }
func isFileTool(name string) bool { return isEditTool(name) || isReadTool(name) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ParseRule parses a rule such as "Bash(npm test:*)". Errors say what is
// wrong with it; they do not repeat the rule. "~/" in path rules is the
// current user's home directory.
func ParseRule(text string) (Rule, error) {
	home, _ := os.UserHomeDir()
	return parseRule(text, home)
}

// parseRule parses text; home is what "~/" means in path rules ("" looks
// it up when needed).
func parseRule(text, home string) (Rule, error) {
	r := Rule{Text: text}
	s := strings.TrimSpace(text)
	name, spec, hasSpec := strings.Cut(s, "(")
	if hasSpec {
		if !strings.HasSuffix(spec, ")") {
			return Rule{}, errors.New(`missing ")" at the end`)
		}
		spec = spec[:len(spec)-1]
	} else if strings.Contains(s, ")") {
		return Rule{}, errors.New(`")" without "("`)
	}
	if !validToolName(name) {
		if name == "" {
			return Rule{}, errors.New("no tool name")
		}
		return Rule{}, fmt.Errorf("%q is not a tool name", name)
	}
	r.Tool = canonicalTool(name)
	if !hasSpec {
		return r, nil
	}
	if strings.TrimSpace(spec) == "" {
		return Rule{}, errors.New("empty parentheses; write the tool name alone to cover every use")
	}
	if strings.TrimSpace(spec) == "*" {
		return r, nil // Tool(*) is the whole tool
	}
	r.Specifier = spec
	var err error
	switch {
	case r.Tool == "Bash":
		r.kind = kindBash
		r.bash, err = compileBash(spec)
	case isFileTool(r.Tool):
		r.kind = kindPath
		r.path, err = compilePath(spec, home)
	case r.Tool == "WebFetch" && strings.HasPrefix(spec, "domain:"):
		r.kind = kindDomain
		r.domain = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(spec, "domain:")))
		if r.domain == "" || strings.ContainsAny(r.domain, "/ ") {
			err = errors.New("domain: needs a host name such as example.com or *.example.com")
		}
	default:
		r.kind = kindOther
	}
	if err != nil {
		return Rule{}, err
	}
	return r, nil
}

func validToolName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case (c >= '0' && c <= '9' || c == '-') && i > 0:
		case c == '*' && i == len(s)-1 && strings.HasPrefix(s, "mcp__"):
		default:
			return false
		}
	}
	return true
}

// appliesTo reports whether the rule is about calls of tool.
func (r *Rule) appliesTo(tool string) bool {
	switch {
	case r.Tool == tool:
		return true
	case r.Tool == "Edit":
		return isEditTool(tool)
	case r.Tool == "Read":
		return isReadTool(tool)
	case strings.HasPrefix(r.Tool, "mcp__"):
		server := strings.TrimSuffix(strings.TrimSuffix(r.Tool, "*"), "__")
		return strings.Count(server, "__") == 1 && strings.HasPrefix(tool, server+"__")
	}
	return false
}

// String returns the rule as written.
func (r Rule) String() string { return r.Text }

// bashPattern is a compiled Bash specifier.
type bashPattern struct {
	runes []rune
	// optionalTail: the pattern ends in " *", which may also match nothing
	// ("ls *" matches ls).
	optionalTail bool
}

func compileBash(spec string) (*bashPattern, error) {
	legacyPrefix := strings.HasSuffix(spec, ":*")
	if legacyPrefix {
		spec = strings.TrimSuffix(spec, ":*")
	}
	words, err := bashcmd.SplitWords(spec)
	if err != nil {
		return nil, errors.New("the command must be one simple command (no ;, &&, |, redirections or syntax errors)")
	}
	p := &bashPattern{}
	for i, w := range words {
		if i > 0 {
			p.runes = append(p.runes, ' ')
		}
		for _, part := range w.Parts() {
			switch {
			case !part.Dynamic:
				p.runes = appendLiteral(p.runes, part.Text)
			case strings.Trim(part.Text, "*") == "":
				p.runes = append(p.runes, symWildcard)
			case strings.HasPrefix(part.Text, "$") || strings.HasPrefix(part.Text, "`") ||
				strings.HasPrefix(part.Text, "<(") || strings.HasPrefix(part.Text, ">("):
				return nil, fmt.Errorf("%s: a rule cannot contain expansions or substitutions", part.Text)
			default: // ?, [..], {..}, ~ stand for themselves in a rule
				p.runes = appendLiteral(p.runes, part.Text)
			}
		}
	}
	if legacyPrefix {
		p.runes = append(p.runes, ' ', symWildcard)
	}
	n := len(p.runes)
	p.optionalTail = n >= 2 && p.runes[n-1] == symWildcard && p.runes[n-2] == ' '
	return p, nil
}

// appendLiteral appends text, spaces inside a word marked as such.
func appendLiteral(rs []rune, text string) []rune {
	for _, c := range text {
		if c == ' ' {
			c = symWordSpace
		}
		rs = append(rs, c)
	}
	return rs
}

// subject renders command words for matching.
func subject(words []bashcmd.Word) []rune {
	var rs []rune
	for i, w := range words {
		if i > 0 {
			rs = append(rs, ' ')
		}
		for _, part := range w.Parts() {
			if part.Dynamic {
				rs = append(rs, symUnknown)
			} else {
				rs = appendLiteral(rs, part.Text)
			}
		}
	}
	return rs
}

func (p *bashPattern) match(words []bashcmd.Word) match {
	s := subject(words)
	m := matchRunes(p.runes, s)
	if p.optionalTail && m != fullMatch {
		m = max(m, matchRunes(p.runes[:len(p.runes)-2], s))
	}
	return m
}

// anchor is what a relative path pattern is relative to.
type anchor int

const (
	anchorWorkspace anchor = iota
	anchorRoot
	anchorHome
)

// pathPattern is a compiled path specifier.
type pathPattern struct {
	anchor anchor
	home   string
	// up: the pattern starts with "..", so it may match outside its anchor.
	up   bool
	glob *glob.Pattern
}

func compilePath(spec, home string) (*pathPattern, error) {
	p := &pathPattern{}
	rest := spec
	switch {
	case strings.HasPrefix(rest, "//"):
		p.anchor, rest = anchorRoot, strings.TrimLeft(rest, "/")
	case rest == "~" || strings.HasPrefix(rest, "~/"):
		if home == "" {
			return nil, errors.New("~ needs a home directory, and none is known")
		}
		p.anchor, p.home, rest = anchorHome, home, strings.TrimPrefix(strings.TrimPrefix(rest, "~"), "/")
	case strings.HasPrefix(rest, "/"):
		rest = strings.TrimLeft(rest, "/")
	case strings.HasPrefix(rest, "./"):
		rest = strings.TrimPrefix(rest, "./")
	default:
		// gitignore: a pattern with no slash but at the end matches at
		// any depth.
		if !strings.Contains(strings.TrimSuffix(rest, "/"), "/") {
			rest = "**/" + rest
		}
	}
	rest = strings.TrimSuffix(rest, "/")
	p.up = rest == ".." || strings.HasPrefix(rest, "../")
	pattern := "**"
	if rest != "" {
		// A match on a directory covers what is below it.
		pattern = rest + "/**"
	}
	g, err := glob.Compile(pattern, glob.MatchDot())
	if err != nil {
		return nil, err
	}
	p.glob = g
	return p, nil
}

// match reports whether the absolute path abs matches, for a session whose
// workspace is workspace.
func (p *pathPattern) match(abs, workspace string) bool {
	var root string
	switch p.anchor {
	case anchorRoot:
		root = "/"
	case anchorHome:
		root = p.home
	default:
		if workspace == "" {
			return false
		}
		root = workspace
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return false
	}
	rel = filepath.ToSlash(rel)
	if (rel == ".." || strings.HasPrefix(rel, "../")) && !p.up {
		return false
	}
	if rel == "." {
		rel = ""
	}
	return p.glob.Match(rel)
}

// matchHost reports whether the URL's host matches a domain: specifier:
// "example.com" covers the host and its subdomains, "*.example.com" only
// the subdomains. ok is false when the URL has no host.
func matchHost(domain, rawURL string) (m match, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return noMatch, false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	sub, wildcard := strings.CutPrefix(domain, "*.")
	if wildcard && strings.HasSuffix(host, "."+sub) ||
		!wildcard && (host == domain || strings.HasSuffix(host, "."+domain)) {
		return fullMatch, true
	}
	return noMatch, true
}
