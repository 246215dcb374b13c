package permission

import (
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/bashcmd"
)

// matchCall checks the rule against a call. For a Bash line it is the
// deny/ask view: the strongest match of any command. forAllow makes
// specifiers this package cannot interpret match nothing instead of maybe.
// what names the part of the call that matched (a Bash command).
func (r *Rule) matchCall(c *call, forAllow bool) (match, string) {
	if !r.appliesTo(c.tool) {
		return noMatch, ""
	}
	switch r.kind {
	case kindTool:
		return fullMatch, ""
	case kindBash:
		if c.parseErr != nil {
			return maybeMatch, ""
		}
		best, what := noMatch, ""
		for _, cmd := range c.script.Commands {
			if m := r.bash.denyMatch(cmd); m > best {
				best, what = m, cmd.String()
				if best == fullMatch {
					break
				}
			}
		}
		return best, what
	case kindPath:
		if c.path == "" {
			return maybeIf(!forAllow), ""
		}
		if r.path.match(c.path, c.Workspace) {
			return fullMatch, ""
		}
		return noMatch, ""
	case kindDomain:
		m, ok := matchHost(r.domain, c.url)
		if !ok {
			return maybeIf(!forAllow), ""
		}
		return m, ""
	}
	return maybeIf(!forAllow), ""
}

func maybeIf(b bool) match {
	if b {
		return maybeMatch
	}
	return noMatch
}

// maxHeuristicWords bounds the search for a denied command among the
// arguments of a wrapper; longer commands are answered "maybe".
const maxHeuristicWords = 256

// denyMatch is how a deny or ask rule matches one command: on the command
// that runs or the words as written, with a path in command position also
// tried by its last element (/bin/rm is rm). An opaque command may be
// anything; a program that may run its arguments (strace, parallel, an
// unknown wrapper) may run a denied command found among them.
func (p *bashPattern) denyMatch(cmd bashcmd.Command) match {
	m := noMatch
	if cmd.Opaque {
		m = maybeMatch
	}
	for _, ws := range [][]bashcmd.Word{cmd.Words, cmd.Full} {
		if len(ws) == 0 {
			continue
		}
		m = max(m, p.match(ws))
		first := ws[0]
		if !first.Dynamic && strings.Contains(first.Text, "/") && !strings.Contains(first.Text, "=") {
			alt := append([]bashcmd.Word{bashcmd.Lit(path.Base(first.Text))}, ws[1:]...)
			m = max(m, p.match(alt))
		}
		if m == fullMatch {
			return m
		}
	}
	if m == noMatch && cmd.RunsArguments() {
		if len(cmd.Words) > maxHeuristicWords {
			return maybeMatch
		}
		lead := p.leadingLiteral()
		for k := 1; k < len(cmd.Words); k++ {
			w := cmd.Words[k]
			if !w.Dynamic && !strings.HasPrefix(w.Text, lead) && !strings.HasPrefix(path.Base(w.Text), lead) {
				continue
			}
			rest := cmd.Words[k:]
			if !w.Dynamic && strings.Contains(w.Text, "/") {
				rest = append([]bashcmd.Word{bashcmd.Lit(path.Base(w.Text))}, rest[1:]...)
			}
			if p.match(rest) != noMatch {
				return maybeMatch
			}
		}
	}
	return m
}

// leadingLiteral returns the literal text the pattern starts with, up to
// its first wildcard or word break.
func (p *bashPattern) leadingLiteral() string {
	var b strings.Builder
	for _, r := range p.runes {
		if r < 0 || r == ' ' || r == symWordSpace {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// subcommandTools are programs whose first argument names what they do
// (git push, npm test), so a suggested rule keeps it.
var subcommandTools = map[string]bool{
	"git": true, "npm": true, "npx": true, "yarn": true, "pnpm": true, "bun": true, "go": true,
	"cargo": true, "docker": true, "podman": true, "kubectl": true, "helm": true, "make": true,
	"pip": true, "pip3": true, "uv": true, "poetry": true, "gh": true, "terraform": true,
	"apt": true, "apt-get": true, "brew": true, "systemctl": true, "dotnet": true, "mvn": true,
	"gradle": true, "rustup": true, "deno": true, "python": true, "python3": true, "node": true,
}

// suggest returns a rule that would allow calls like c, or "".
func (p *Policy) suggest(c *call) string {
	switch {
	case c.tool == "Bash":
		if c.parseErr != nil || len(c.script.Effects) > 0 {
			return ""
		}
		for _, cmd := range c.script.Commands {
			if p.allowBash(cmd) != nil {
				continue
			}
			return bashSuggestion(cmd)
		}
		return ""
	case isFileTool(c.tool) && c.path != "":
		dir := c.path
		if c.tool == "Read" || isEditTool(c.tool) {
			dir = filepath.Dir(c.path)
		}
		family := "Read"
		if isEditTool(c.tool) {
			family = "Edit"
		}
		if c.Workspace != "" {
			if rel, err := filepath.Rel(filepath.Clean(c.Workspace), dir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				if rel == "." {
					return family + "(/**)"
				}
				return family + "(/" + escapeGlob(filepath.ToSlash(rel)) + "/**)"
			}
		}
		if dir == "/" {
			return family + "(//**)"
		}
		return family + "(/" + escapeGlob(filepath.ToSlash(dir)) + "/**)"
	}
	return c.tool
}

// bashSuggestion proposes a prefix rule for cmd: the program, and its
// subcommand for tools such as git or npm. A privileged command gets an
// exact rule of its words as written. Commands with dynamic words in those
// places get none.
func bashSuggestion(cmd bashcmd.Command) string {
	if cmd.Opaque || cmd.Dynamic() {
		return ""
	}
	if cmd.Privileged {
		quoted := make([]string, len(cmd.Full))
		for i, w := range cmd.Full {
			if !suggestable(w) {
				return ""
			}
			quoted[i] = quoteWord(w.Text)
		}
		return "Bash(" + strings.Join(quoted, " ") + ")"
	}
	if !suggestable(cmd.Words[0]) {
		return ""
	}
	words := []string{quoteWord(cmd.Words[0].Text)}
	if len(cmd.Words) > 1 && subcommandTools[cmd.Words[0].Text] {
		w := cmd.Words[1]
		if suggestable(w) && w.Text != "" && !strings.HasPrefix(w.Text, "-") {
			words = append(words, quoteWord(w.Text))
		}
	}
	return "Bash(" + strings.Join(words, " ") + ":*)"
}

// suggestable reports whether a word can be written into a rule: text
// without control characters.
func suggestable(w bashcmd.Word) bool {
	if w.Dynamic || !utf8.ValidString(w.Text) {
		return false
	}
	for _, c := range w.Text {
		if unicode.IsControl(c) {
			return false
		}
	}
	return true
}

// quoteWord quotes a word for a rule when it holds anything but plain
// characters.
func quoteWord(s string) string {
	plain := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-./=@%+,:", c)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// escapeGlob protects glob characters in a path used in a rule.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]{}\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
