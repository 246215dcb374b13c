package bashcmd

import "strings"

// sedReadOnly accepts sed invocations that print: no -i, no script file,
// and scripts made only of commands that cannot write files or run
// programs (unless --sandbox forbids those).
func sedReadOnly(args []Word) bool {
	if !allLiteral(args) {
		return false
	}
	var scripts, operands []string
	sandbox, explicit := false, false
	for i := 0; i < len(args); i++ {
		t := args[i].Text
		switch {
		case t == "--":
			for _, a := range args[i+1:] {
				operands = append(operands, a.Text)
			}
			i = len(args)
		case t == "-e" || t == "--expression":
			if i+1 >= len(args) {
				return false
			}
			scripts = append(scripts, args[i+1].Text)
			explicit = true
			i++
		case strings.HasPrefix(t, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(t, "--expression="))
			explicit = true
		case t == "--sandbox":
			sandbox = true
		case t == "--quiet" || t == "--silent" || t == "--regexp-extended" || t == "--posix" ||
			t == "--separate" || t == "--unbuffered" || t == "--null-data" || t == "--debug":
		case strings.HasPrefix(t, "--"):
			return false // --in-place, --file, …
		case strings.HasPrefix(t, "-") && t != "-":
			opts := t[1:]
			for j := 0; j < len(opts); j++ {
				switch opts[j] {
				case 'n', 'E', 'r', 's', 'u', 'z':
				case 'e':
					explicit = true
					if j+1 < len(opts) {
						scripts = append(scripts, opts[j+1:])
					} else if i+1 < len(args) {
						scripts = append(scripts, args[i+1].Text)
						i++
					} else {
						return false
					}
					j = len(opts)
				default:
					return false // -i, -f, -l, …
				}
			}
		default:
			operands = append(operands, t)
		}
	}
	if !explicit {
		if len(operands) == 0 {
			return false
		}
		scripts = append(scripts, operands[0])
	}
	if sandbox {
		return true
	}
	for _, s := range scripts {
		if !sedScriptSafe(s) {
			return false
		}
	}
	return true
}

// sedScriptSafe parses a sed script far enough to know that every command
// only prints, deletes, substitutes or moves between lines.
func sedScriptSafe(s string) bool {
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	// delimited reads text up to an unescaped delim.
	delimited := func(delim byte) bool {
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case delim:
				i++
				return true
			case '\n':
				return false
			}
			i++
		}
		return false
	}
	address := func() bool {
		switch {
		case i < len(s) && s[i] >= '0' && s[i] <= '9':
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '~') {
				i++
			}
		case i < len(s) && s[i] == '$':
			i++
		case i < len(s) && s[i] == '/':
			i++
			if !delimited('/') {
				return false
			}
			for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		case i+1 < len(s) && s[i] == '\\':
			d := s[i+1]
			i += 2
			if !delimited(d) {
				return false
			}
		}
		return true
	}
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ';') {
			i++
		}
		if i >= len(s) {
			return true
		}
		if !address() {
			return false
		}
		if i < len(s) && s[i] == ',' {
			i++
			if i < len(s) && s[i] == '+' {
				i++
			}
			if !address() {
				return false
			}
		}
		skipSpace()
		if i < len(s) && s[i] == '!' {
			i++
			skipSpace()
		}
		if i >= len(s) {
			return false
		}
		c := s[i]
		i++
		switch c {
		case '{':
			continue // a block's first command may follow at once
		case 'p', 'P', 'd', 'D', 'l', '=', 'n', 'N', 'g', 'G', 'h', 'H', 'x', 'z', 'F', '}':
		case 'q', 'Q':
			skipSpace()
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case 's', 'y':
			if i >= len(s) || s[i] == '\n' || s[i] == '\\' {
				return false
			}
			d := s[i]
			i++
			// The pattern, then the replacement (or the second set).
			if !delimited(d) {
				return false
			}
			if !delimited(d) {
				return false
			}
			if c == 's' {
				for i < len(s) && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
					i++
				}
			}
		default:
			return false // a, i, c, r, R, w, W, e, b, t, labels, comments, …
		}
		skipSpace()
		if i < len(s) && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
			return false
		}
	}
}
