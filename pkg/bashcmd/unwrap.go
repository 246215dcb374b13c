package bashcmd

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// unwrapper looks through the wrappers of one simple command.
type unwrapper struct {
	s      *Script
	r      resolver
	redirs []*syntax.Redirect // of the command's statement, for a shell's stdin
	depth  int
}

// shells are the programs that run a script given with -c or on stdin.
var shells = map[string]bool{
	"bash": true, "sh": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true,
	"rbash": true, "posh": true, "yash": true,
}

// run peels wrappers off words until a plain command is left, and emits it.
func (u *unwrapper) run(words, assigns []Word, fr frame) {
	for hops := 0; ; hops++ {
		if len(words) == 0 {
			return
		}
		if hops > maxDepth {
			u.s.emit(words, assigns, fr, false, true)
			return
		}
		if words[0].Dynamic {
			u.s.emit(words, assigns, fr, false, false)
			return
		}
		name := baseName(words[0].Text)
		args := words[1:]
		var (
			inner      []Word
			ok         bool
			privileged bool
		)
		switch name {
		case "nohup", "builtin":
			inner, ok = args, true
		case "nice":
			inner, ok = skipOptions(args, "n", []string{"adjustment"}, true)
		case "timeout":
			inner, ok = skipOptions(args, "sk", []string{"signal", "kill-after"}, false)
			if ok {
				// The duration comes first.
				if len(inner) == 0 {
					inner, ok = nil, false
				} else {
					inner = inner[1:]
				}
			}
		case "stdbuf":
			inner, ok = skipOptions(args, "ioe", []string{"input", "output", "error"}, false)
		case "setsid":
			inner, ok = skipOptions(args, "", nil, false)
		case "ionice":
			inner, ok = skipOptions(args, "cn", []string{"class", "classdata"}, false)
		case "time":
			inner, ok = skipOptions(args, "", nil, false)
		case "command":
			if hasShortFlag(args, "vV") {
				u.s.emit(words, assigns, fr, false, false) // a lookup, not a run
				return
			}
			inner, ok = skipOptions(args, "", nil, false)
		case "exec":
			inner, ok = skipOptions(args, "a", nil, false)
		case "busybox":
			if len(args) > 0 && !strings.HasPrefix(args[0].Text, "-") {
				inner, ok = args, true
			}
		case "env":
			var envAssigns []Word
			inner, envAssigns, privileged, ok = unwrapEnv(args)
			if ok && len(inner) == 0 {
				// env alone prints the environment.
				u.s.emit(words, assigns, fr, fr.privileged || privileged, false)
				return
			}
			assigns = append(assigns, envAssigns...)
		case "sudo", "doas":
			inner, ok = unwrapSudo(name, args)
			if ok && len(inner) == 0 {
				u.s.emit(words, assigns, fr, true, false) // sudo -l, sudo -v, …
				return
			}
			privileged = true
		case "xargs":
			inner, ok = u.xargs(args)
			if ok && len(inner) == 0 {
				inner = []Word{Lit("echo")}
			}
			if ok {
				inner = append(append([]Word(nil), inner...), Word{Text: "{stdin}", Dynamic: true, parts: []Part{{Text: "{stdin}", Dynamic: true}}})
			}
		case "find":
			u.find(words, assigns, fr)
			return
		case "eval":
			u.eval(words, assigns, fr)
			return
		case "su":
			if script, found := suCommand(args); found {
				u.shellScript(words, assigns, fr, script, "su", true)
				return
			}
		case "watch":
			u.watch(words, assigns, fr)
			return
		default:
			if shells[name] {
				u.shell(words, assigns, fr, name)
				return
			}
		}
		switch {
		case ok && len(inner) == 0:
			// A wrapper with nothing to run: report it as a command.
			u.s.emit(words, assigns, fr, privileged, false)
			return
		case ok:
			fr = frame{full: fr.full, wrappers: appendStr(fr.wrappers, name), privileged: fr.privileged || privileged}
			words = inner
		case isWrapperName(name):
			// Known wrapper, options we cannot follow: what runs is hidden.
			u.s.emit(words, assigns, fr, privileged, true)
			return
		default:
			u.s.emit(words, assigns, fr, false, false)
			return
		}
	}
}

func isWrapperName(name string) bool {
	switch name {
	case "nice", "timeout", "stdbuf", "setsid", "ionice", "time", "command", "exec", "env",
		"sudo", "doas", "xargs", "nohup", "builtin", "busybox":
		return true
	}
	return false
}

func appendStr(s []string, v string) []string {
	return append(append([]string(nil), s...), v)
}

// skipOptions skips the options of a wrapper and returns the words after
// them. withArg lists the short options that take an argument, longWithArg
// the long ones; any other option is taken to stand alone (a real program
// refuses options it does not know, so a misreading can only make us see
// a command that never runs). numeric allows nice's "-5" form. A dynamic
// word among the options makes it give up.
func skipOptions(args []Word, withArg string, longWithArg []string, numeric bool) ([]Word, bool) {
	i := 0
	for i < len(args) {
		w := args[i]
		if w.Dynamic {
			return nil, false
		}
		t := w.Text
		if t == "--" {
			return args[i+1:], true
		}
		if !strings.HasPrefix(t, "-") || t == "-" {
			return args[i:], true
		}
		if strings.HasPrefix(t, "--") {
			name, _, hasValue := strings.Cut(t[2:], "=")
			if contains(longWithArg, name) && !hasValue {
				i += 2
			} else {
				i++
			}
			continue
		}
		if numeric && isDigits(t[1:]) {
			i++
			continue
		}
		// A cluster of short options; the first that takes an argument
		// takes the rest of the word, or the next word when it ends the
		// cluster.
		opts := t[1:]
		for j := 0; j < len(opts); j++ {
			if strings.IndexByte(withArg, opts[j]) >= 0 {
				if j == len(opts)-1 {
					i++
				}
				break
			}
		}
		i++
	}
	return nil, true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hasShortFlag reports whether an option cluster before the first operand
// holds one of flags.
func hasShortFlag(args []Word, flags string) bool {
	for _, w := range args {
		t := w.Text
		if t == "--" || !strings.HasPrefix(t, "-") || strings.HasPrefix(t, "--") {
			return false
		}
		if strings.ContainsAny(t[1:], flags) {
			return true
		}
	}
	return false
}

// unwrapEnv reads env's options and assignments. Options that change the
// environment as a whole make the command privileged; -S (split a string
// into words) is not followed.
func unwrapEnv(args []Word) (inner, assigns []Word, privileged, ok bool) {
	i := 0
options:
	for i < len(args) {
		w := args[i]
		if w.Dynamic {
			return nil, nil, false, false
		}
		t := w.Text
		switch {
		case t == "--":
			i++
			break options
		case t == "-i" || t == "--ignore-environment" || t == "-":
			privileged = true
			i++
		case t == "-0" || t == "--null" || t == "-v" || t == "--debug":
			i++
		case t == "-u" || t == "--unset" || t == "-C" || t == "--chdir":
			privileged = true
			i += 2
		case strings.HasPrefix(t, "--unset=") || strings.HasPrefix(t, "--chdir=") ||
			(strings.HasPrefix(t, "-u") && len(t) > 2) || (strings.HasPrefix(t, "-C") && len(t) > 2):
			privileged = true
			i++
		case strings.HasPrefix(t, "-"):
			return nil, nil, false, false // -S and anything unknown
		default:
			break options
		}
	}
	for i < len(args) {
		name, _, isAssign := strings.Cut(args[i].Text, "=")
		if !isAssign || !validName(name) {
			break
		}
		assigns = append(assigns, args[i])
		if !safeEnv(name) || args[i].Dynamic {
			privileged = true
		}
		i++
	}
	return args[min(i, len(args)):], assigns, privileged, true
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// unwrapSudo skips the options of sudo or doas. An empty result with ok
// means it runs no command (sudo -l, sudo -v, …).
func unwrapSudo(name string, args []Word) ([]Word, bool) {
	withArg := "ugCDhprtTU"
	longWithArg := []string{"user", "group", "close-from", "chdir", "host", "prompt", "role", "type", "command-timeout", "other-user"}
	if name == "doas" {
		withArg, longWithArg = "uC", nil
	}
	for _, w := range args {
		if w.Dynamic {
			return nil, false
		}
		t := w.Text
		if t == "--" || !strings.HasPrefix(t, "-") {
			break
		}
		if name == "sudo" && (t == "-e" || t == "--edit" || t == "-l" || t == "--list" || t == "-v" ||
			t == "--validate" || t == "-k" || t == "-K" || t == "--reset-timestamp" || t == "--remove-timestamp" ||
			t == "-V" || t == "--version" || t == "-h" || t == "--help") {
			return nil, true
		}
	}
	inner, ok := skipOptions(args, withArg, longWithArg, false)
	if !ok {
		return nil, false
	}
	// sudo accepts VAR=value before the command.
	for len(inner) > 0 {
		n, _, isAssign := strings.Cut(inner[0].Text, "=")
		if !isAssign || !validName(n) {
			break
		}
		inner = inner[1:]
	}
	return inner, true
}

// xargs skips xargs's options and returns the command it runs.
func (u *unwrapper) xargs(args []Word) ([]Word, bool) {
	return skipOptions(args, "adEILnPs", []string{"arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}, false)
}

// find reports find itself, and each command it runs with -exec, -execdir,
// -ok or -okdir; "{}" in those stands for file names.
func (u *unwrapper) find(words, assigns []Word, fr frame) {
	u.s.emit(words, assigns, fr, false, false)
	args := words[1:]
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.Dynamic && !strings.HasPrefix(w.Text, "-") {
			continue
		}
		switch w.Text {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		var inner []Word
		for ; j < len(args); j++ {
			if t := args[j].Text; !args[j].Dynamic && (t == ";" || t == "+") {
				break
			}
			inner = append(inner, substituteBraces(args[j]))
		}
		if len(inner) > 0 {
			sub := unwrapper{s: u.s, r: u.r, depth: u.depth + 1}
			sub.run(inner, nil, frame{full: fr.full, wrappers: appendStr(fr.wrappers, "find"), privileged: fr.privileged})
		}
		i = j
	}
}

// substituteBraces marks the "{}" in a word of find -exec as dynamic.
func substituteBraces(w Word) Word {
	if !strings.Contains(w.Text, "{}") {
		return w
	}
	var b wordBuilder
	for _, p := range w.Parts() {
		if p.Dynamic {
			b.dyn(p.Text)
			continue
		}
		rest := p.Text
		for {
			before, after, found := strings.Cut(rest, "{}")
			b.lit(before)
			if !found {
				break
			}
			b.dyn("{}")
			rest = after
		}
	}
	return b.word()
}

// eval parses its arguments, joined by spaces, as a script.
func (u *unwrapper) eval(words, assigns []Word, fr frame) {
	args := words[1:]
	for _, w := range args {
		if w.Dynamic {
			u.s.emit(words, assigns, fr, false, true)
			return
		}
	}
	if len(args) == 0 {
		return
	}
	u.shellScript(words, assigns, fr, joinWords(args), "eval", false)
}

// shellScript analyzes script as run by a wrapper, or marks the command
// opaque when the script does not parse.
func (u *unwrapper) shellScript(words, assigns []Word, fr frame, script, wrapper string, privileged bool) {
	inner := frame{full: fr.full, wrappers: appendStr(fr.wrappers, wrapper), privileged: fr.privileged || privileged}
	if !u.s.script(script, inner, u.depth) {
		u.s.emit(words, assigns, fr, privileged, true)
	}
}

// shell follows a shell invocation: the script of -c, or the script it
// reads on standard input from a here-document or here-string. A shell
// running a script file is an ordinary command.
func (u *unwrapper) shell(words, assigns []Word, fr frame, name string) {
	args := words[1:]
	withC, fromStdin := false, false
	i := 0
loop:
	for ; i < len(args); i++ {
		w := args[i]
		if w.Dynamic {
			u.s.emit(words, assigns, fr, false, true)
			return
		}
		t := w.Text
		switch {
		case t == "--" || t == "-":
			i++
			break loop
		case t == "--rcfile" || t == "--init-file":
			i++
		case strings.HasPrefix(t, "--"):
		case strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+"):
			opts := t[1:]
			if strings.ContainsRune(opts, 'c') {
				withC = true
			}
			if strings.ContainsRune(opts, 's') {
				fromStdin = true
			}
			if strings.HasSuffix(opts, "o") || strings.HasSuffix(opts, "O") {
				i++ // -o option, -O shopt
			}
		default:
			break loop
		}
	}
	operands := args[min(i, len(args)):]
	switch {
	case withC:
		// bash -c with no script fails without running anything, but an
		// option we misread could have been the script: stay opaque.
		if len(operands) == 0 || operands[0].Dynamic {
			u.s.emit(words, assigns, fr, false, true)
			return
		}
		u.shellScript(words, assigns, fr, operands[0].Text, name, false)
	case len(operands) > 0 && !fromStdin:
		u.s.emit(words, assigns, fr, false, false) // runs a script file
	default:
		script, ok := u.stdinScript()
		if !ok {
			u.s.emit(words, assigns, fr, false, true)
			return
		}
		u.shellScript(words, assigns, fr, script, name, false)
	}
}

// stdinScript returns the text a command reads on standard input when it
// is a literal here-document or here-string.
func (u *unwrapper) stdinScript() (string, bool) {
	var last *syntax.Redirect
	for _, rd := range u.redirs {
		if rd.N != nil && rd.N.Value != "0" {
			continue
		}
		switch rd.Op {
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			last = rd
		}
	}
	if last == nil {
		return "", false
	}
	switch last.Op {
	case syntax.WordHdoc:
		w := u.r.word(last.Word)
		return w.Text, !w.Dynamic
	case syntax.Hdoc, syntax.DashHdoc:
		if last.Hdoc == nil {
			return "", true
		}
		quoted := false
		for _, p := range last.Word.Parts {
			switch p := p.(type) {
			case *syntax.SglQuoted, *syntax.DblQuoted:
				quoted = true
			case *syntax.Lit:
				quoted = quoted || strings.Contains(p.Value, `\`)
			}
		}
		var text strings.Builder
		for _, p := range last.Hdoc.Parts {
			lit, isLit := p.(*syntax.Lit)
			if !isLit {
				return "", false
			}
			if quoted {
				text.WriteString(lit.Value)
			} else {
				text.WriteString(unescapeHeredoc(lit.Value))
			}
		}
		return text.String(), true
	}
	return "", false // a file or another descriptor
}

// suCommand finds the command of "su [options] [user] -c command".
func suCommand(args []Word) (string, bool) {
	for i, w := range args {
		t := w.Text
		switch {
		case t == "-c" || t == "--command":
			if i+1 < len(args) && !args[i+1].Dynamic {
				return args[i+1].Text, true
			}
			return "", false
		case strings.HasPrefix(t, "--command="):
			return strings.TrimPrefix(t, "--command="), !w.Dynamic
		}
	}
	return "", false
}

// watch follows "watch [options] command…": the words are joined and run
// by sh -c, or run as they are with -x.
func (u *unwrapper) watch(words, assigns []Word, fr frame) {
	args := words[1:]
	exec := hasShortFlag(args, "x") || containsText(args, "--exec")
	inner, ok := skipOptions(args, "n", []string{"interval", "differences"}, false)
	if !ok || len(inner) == 0 {
		u.s.emit(words, assigns, fr, false, !ok)
		return
	}
	if exec {
		sub := unwrapper{s: u.s, r: u.r, depth: u.depth + 1}
		sub.run(inner, nil, frame{full: fr.full, wrappers: appendStr(fr.wrappers, "watch"), privileged: fr.privileged})
		return
	}
	for _, w := range inner {
		if w.Dynamic {
			u.s.emit(words, assigns, fr, false, true)
			return
		}
	}
	u.shellScript(words, assigns, fr, joinWords(inner), "watch", false)
}

func containsText(ws []Word, s string) bool {
	for _, w := range ws {
		if w.Text == s {
			return true
		}
	}
	return false
}
