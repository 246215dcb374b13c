package bashcmd

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// Word is one word of a simple command after quote removal.
type Word struct {
	// Text is the word's value. Parts only known at run time appear as
	// written in the command line.
	Text string
	// Dynamic is true when some part of the word is only known at run time:
	// a parameter or arithmetic expansion, a command or process
	// substitution, an unquoted glob, brace expansion or tilde. An unquoted
	// dynamic part may expand to no word or to several.
	Dynamic bool

	parts []Part
}

// Part is a piece of a Word: literal text, or a piece only known at run
// time.
type Part struct {
	// Text is the literal text, or the dynamic piece as written.
	Text string
	// Dynamic marks a piece only known at run time.
	Dynamic bool
}

// Parts returns the pieces of the word in order. Adjacent literal pieces are
// merged.
func (w Word) Parts() []Part {
	if w.parts == nil && !w.Dynamic {
		return []Part{{Text: w.Text}}
	}
	return w.parts
}

// Lit returns a literal word.
func Lit(s string) Word { return Word{Text: s, parts: []Part{{Text: s}}} }

// wordBuilder accumulates the parts of a word.
type wordBuilder struct {
	parts []Part
}

func (b *wordBuilder) lit(s string) {
	if s == "" {
		return
	}
	if n := len(b.parts); n > 0 && !b.parts[n-1].Dynamic {
		b.parts[n-1].Text += s
		return
	}
	b.parts = append(b.parts, Part{Text: s})
}

func (b *wordBuilder) dyn(s string) {
	b.parts = append(b.parts, Part{Text: s, Dynamic: true})
}

func (b *wordBuilder) word() Word {
	var w Word
	var text strings.Builder
	for _, p := range b.parts {
		text.WriteString(p.Text)
		w.Dynamic = w.Dynamic || p.Dynamic
	}
	w.Text = text.String()
	w.parts = b.parts
	if w.parts == nil {
		w.parts = []Part{{Text: ""}}
	}
	return w
}

// resolver turns syntax words into Words, quoting removed. src is the text
// the words were parsed from, for showing dynamic parts as written.
type resolver struct {
	src string
}

func (r resolver) source(n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(r.src) || start > end {
		return "?"
	}
	return r.src[start:end]
}

// word resolves w.
func (r resolver) word(w *syntax.Word) Word {
	var b wordBuilder
	for i, part := range w.Parts {
		r.part(&b, part, i == 0, false)
	}
	return b.word()
}

func (r resolver) part(b *wordBuilder, part syntax.WordPart, first, quoted bool) {
	switch p := part.(type) {
	case *syntax.Lit:
		if quoted {
			b.lit(unescapeDouble(p.Value))
		} else {
			unquotedLit(b, p.Value, first)
		}
	case *syntax.SglQuoted:
		if p.Dollar {
			b.lit(ansiC(p.Value))
		} else {
			b.lit(p.Value)
		}
	case *syntax.DblQuoted:
		if len(p.Parts) == 0 {
			b.lit("")
		}
		for _, inner := range p.Parts {
			r.part(b, inner, false, true)
		}
	default: // expansions, substitutions, extended globs, brace expansions
		b.dyn(r.source(part))
	}
}

// unescapeDouble removes the backslashes that quote within double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				out.WriteByte(s[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		out.WriteByte(c)
	}
	return out.String()
}

// unquotedLit resolves an unquoted literal: backslashes quote the next
// character, and glob characters, brace expansions and a leading tilde
// make the word dynamic.
func unquotedLit(b *wordBuilder, s string, first bool) {
	var lit strings.Builder
	flush := func() {
		b.lit(lit.String())
		lit.Reset()
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 < len(s) {
				if s[i+1] != '\n' {
					lit.WriteByte(s[i+1])
				}
				i++
			} else {
				lit.WriteByte(c)
			}
		case c == '~' && i == 0 && first:
			end := strings.IndexByte(s, '/')
			if end < 0 {
				end = len(s)
			}
			flush()
			b.dyn(s[:end])
			i = end - 1
		case c == '*' || c == '?':
			flush()
			b.dyn(string(c))
		case c == '[' && strings.IndexByte(s[i+1:], ']') >= 0:
			end := i + 1 + strings.IndexByte(s[i+1:], ']')
			flush()
			b.dyn(s[i : end+1])
			i = end
		case c == '{':
			if end, ok := braceExpansion(s, i); ok {
				flush()
				b.dyn(s[i : end+1])
				i = end
				continue
			}
			lit.WriteByte(c)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
}

// braceExpansion reports whether s[open] starts a brace expansion such as
// {a,b} or {1..3}, and where it closes.
func braceExpansion(s string, open int) (int, bool) {
	depth := 0
	comma := false
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				inner := s[open+1 : i]
				return i, comma || strings.Contains(inner, "..")
			}
		case ',':
			if depth == 1 {
				comma = true
			}
		}
	}
	return 0, false
}

// ansiC decodes the escapes of a $'…' string.
func ansiC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			out.WriteByte('\a')
		case 'b':
			out.WriteByte('\b')
		case 'e', 'E':
			out.WriteByte(0x1b)
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'v':
			out.WriteByte('\v')
		case '\\', '\'', '"', '?':
			out.WriteByte(e)
		case 'c':
			if i+1 < len(s) {
				i++
				out.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				out.WriteByte('\\')
				out.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if e == 'x' {
				out.WriteByte(byte(n))
			} else if r := rune(n); utf8.ValidRune(r) {
				out.WriteRune(r)
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			out.WriteByte(byte(n))
			i = j - 1
		default:
			out.WriteByte('\\')
			out.WriteByte(e)
		}
	}
	return out.String()
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// unescapeHeredoc removes the backslashes that quote in the body of a
// here-document whose delimiter was not quoted.
func unescapeHeredoc(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '\\':
				out.WriteByte(s[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		out.WriteByte(c)
	}
	return out.String()
}
