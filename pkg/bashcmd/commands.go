package bashcmd

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Command is one simple command of a command line.
type Command struct {
	// Words are the words of the command that runs, wrappers taken off:
	// for "timeout 5 rm -r x" they are rm -r x. Words[0] is the program.
	Words []Word
	// Full are the words as written, wrappers and variable assignments
	// included: for a command found inside "bash -c '…'" they are the words
	// of that bash invocation.
	Full []Word
	// Wrappers names the wrappers taken off, outermost first ("timeout",
	// "bash", "xargs", …).
	Wrappers []string
	// Assigns are the variable assignments given to the command, by the
	// shell (A=b cmd) or by env, as NAME=value words.
	Assigns []Word
	// Privileged is set when the command runs as another user (sudo, doas,
	// su) or with an environment changed in a way that can change what runs
	// (env -i, an assignment to PATH, LD_PRELOAD, …). A rule should then
	// match Full, not Words.
	Privileged bool
	// Opaque is set when the program that really runs cannot be read from
	// the text: eval or a shell given a dynamic script, a shell reading its
	// script from a pipe or a file, a wrapper used with options this
	// package does not know, or wrappers nested too deep.
	Opaque bool
}

// Name returns the program name as written ("" when there is none).
func (c Command) Name() string {
	if len(c.Words) == 0 {
		return ""
	}
	return c.Words[0].Text
}

// Dynamic reports whether the program name is only known at run time.
func (c Command) Dynamic() bool {
	return len(c.Words) > 0 && c.Words[0].Dynamic
}

// String returns the command's words separated by spaces.
func (c Command) String() string { return joinWords(c.Words) }

func joinWords(ws []Word) string {
	texts := make([]string, len(ws))
	for i, w := range ws {
		texts[i] = w.Text
	}
	return strings.Join(texts, " ")
}

// maxDepth bounds how deep nested shell scripts are followed.
const maxDepth = 8

// Effect is something a command line does besides running its commands.
type Effect string

// The effects a command line can have.
const (
	// EffectRedirect: output goes to a file (anything but /dev/null or a
	// file descriptor), or a file is opened for writing.
	EffectRedirect Effect = "redirects output to a file"
	// EffectVariable: shell variables are set, by assignment, declaration,
	// arithmetic or a ${x:=y} expansion. Later commands of the line may
	// behave differently (PATH, IFS, …).
	EffectVariable Effect = "sets shell variables"
	// EffectFunction: a function is defined; it may shadow a program name.
	EffectFunction Effect = "defines a function"
	// EffectBackground: a job or coprocess keeps running in the background.
	EffectBackground Effect = "starts a background job"
)

// Script is what a command line does.
type Script struct {
	// Commands are the simple commands, in order of appearance.
	Commands []Command
	// Effects are the line's other effects, each listed once.
	Effects []Effect
}

// Parse parses line as Bash and returns its commands and effects. It fails
// only when line is not valid Bash. The Script may be shared with other
// callers that parsed the same line: do not change it.
func Parse(line string) (*Script, error) {
	if s, err, ok := recent.get(line); ok {
		return s, err
	}
	f, err := parse(line)
	if err != nil {
		recent.put(line, nil, err)
		return nil, err
	}
	s := &Script{}
	s.walk(f, resolver{src: line}, frame{}, 0)
	recent.put(line, s, nil)
	return s, nil
}

// recent remembers the last lines parsed: one Bash call is parsed when it
// arrives (may it run in parallel?) and again when its permission is
// judged, and models repeat commands.
var recent = parseCache{m: make(map[string]parsed)}

const (
	parseCacheLines   = 128  // lines remembered
	parseCacheLineLen = 4096 // longer lines are not remembered
)

type parsed struct {
	script *Script
	err    error
}

type parseCache struct {
	mu    sync.Mutex
	m     map[string]parsed
	order []string // oldest first
}

func (c *parseCache) get(line string) (*Script, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[line]
	return p.script, p.err, ok
}

func (c *parseCache) put(line string, s *Script, err error) {
	if len(line) > parseCacheLineLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[line]; ok {
		return
	}
	if len(c.order) >= parseCacheLines {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[line] = parsed{s, err}
	c.order = append(c.order, line)
}

// Commands parses line as Bash and returns every simple command in it, in
// the order they appear, with wrappers looked through. It fails only when
// line is not valid Bash.
func Commands(line string) ([]Command, error) {
	s, err := Parse(line)
	if err != nil {
		return nil, err
	}
	return s.Commands, nil
}

func parse(src string) (*syntax.File, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, fmt.Errorf("bashcmd: parse: %w", err)
	}
	return f, nil
}

// frame is the wrapper context of a nested script.
type frame struct {
	full       []Word
	wrappers   []string
	privileged bool
}

// effect records e once.
func (s *Script) effect(e Effect) {
	if !slices.Contains(s.Effects, e) {
		s.Effects = append(s.Effects, e)
	}
}

// walk visits every node of a parsed script.
func (s *Script) walk(root syntax.Node, r resolver, fr frame, depth int) {
	syntax.Walk(root, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if n.Background || n.Coprocess || n.Disown {
				s.effect(EffectBackground)
			}
			for _, rd := range n.Redirs {
				s.checkRedirect(rd, r)
			}
			if call, ok := n.Cmd.(*syntax.CallExpr); ok {
				s.call(call, n.Redirs, r, fr, depth)
			}
		case *syntax.DeclClause:
			s.effect(EffectVariable)
			words := []Word{Lit(n.Variant.Value)}
			for _, as := range n.Args {
				words = append(words, assignWord(as, r))
			}
			s.emit(words, nil, fr, false, false)
		case *syntax.LetClause:
			s.effect(EffectVariable)
		case *syntax.ArithmCmd:
			s.effect(EffectVariable)
		case *syntax.FuncDecl:
			s.effect(EffectFunction)
		case *syntax.CoprocClause:
			s.effect(EffectBackground)
		case *syntax.ParamExp:
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				s.effect(EffectVariable)
			}
		case *syntax.BinaryArithm:
			if isArithAssign(n.Op) {
				s.effect(EffectVariable)
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				s.effect(EffectVariable)
			}
		}
		return true
	})
}

func isArithAssign(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn,
		syntax.RemAssgn, syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn,
		syntax.ShrAssgn, syntax.AndBoolAssgn, syntax.OrBoolAssgn, syntax.XorBoolAssgn, syntax.PowAssgn:
		return true
	}
	return false
}

// checkRedirect notes redirections that can write: only /dev/null and
// file descriptor duplications are read-only.
func (s *Script) checkRedirect(rd *syntax.Redirect, r resolver) {
	if rd.N != nil && !isDigits(rd.N.Value) {
		s.effect(EffectVariable)
		return
	}
	switch rd.Op {
	case syntax.RdrIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
	case syntax.DplIn, syntax.DplOut:
		if w := r.word(rd.Word); w.Dynamic || !(isDigits(w.Text) || w.Text == "-") {
			s.effect(EffectRedirect)
		}
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
		if w := r.word(rd.Word); w.Dynamic || w.Text != "/dev/null" {
			s.effect(EffectRedirect)
		}
	default:
		s.effect(EffectRedirect)
	}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func assignWord(as *syntax.Assign, r resolver) Word {
	if as.Naked {
		if as.Name != nil {
			return Lit(as.Name.Value)
		}
		if as.Value != nil {
			return r.word(as.Value)
		}
		return Lit("")
	}
	var b wordBuilder
	if as.Name != nil {
		b.lit(as.Name.Value)
	}
	if as.Index != nil {
		b.dyn(r.source(as.Index))
	}
	if as.Append {
		b.lit("+=")
	} else {
		b.lit("=")
	}
	switch {
	case as.Array != nil:
		b.dyn(r.source(as.Array))
	case as.Value != nil:
		for _, p := range r.word(as.Value).parts {
			if p.Dynamic {
				b.dyn(p.Text)
			} else {
				b.lit(p.Text)
			}
		}
	}
	return b.word()
}

// call handles one simple command.
func (s *Script) call(call *syntax.CallExpr, redirs []*syntax.Redirect, r resolver, fr frame, depth int) {
	var assigns []Word
	privileged := false
	for _, as := range call.Assigns {
		w := assignWord(as, r)
		assigns = append(assigns, w)
		if as.Name == nil || !safeEnv(as.Name.Value) || w.Dynamic || as.Array != nil || as.Index != nil {
			privileged = true
		}
	}
	words := make([]Word, len(call.Args))
	for i, w := range call.Args {
		words[i] = r.word(w)
	}
	if len(words) == 0 {
		if len(assigns) > 0 {
			s.effect(EffectVariable)
		}
		return
	}
	full := fr.full
	if full == nil {
		full = append(append([]Word(nil), assigns...), words...)
	}
	u := unwrapper{s: s, r: r, redirs: redirs, depth: depth}
	u.run(words, assigns, frame{full: full, wrappers: fr.wrappers, privileged: fr.privileged || privileged})
}

// emit records a command.
func (s *Script) emit(words, assigns []Word, fr frame, privileged, opaque bool) {
	if len(words) == 0 && !opaque {
		return
	}
	full := fr.full
	if full == nil {
		full = append(append([]Word(nil), assigns...), words...)
	}
	s.Commands = append(s.Commands, Command{
		Words:      words,
		Full:       full,
		Wrappers:   fr.wrappers,
		Assigns:    assigns,
		Privileged: fr.privileged || privileged,
		Opaque:     opaque,
	})
}

// script analyzes a shell script found in a word (bash -c, eval, a
// here-document fed to a shell), in the wrapper context fr.
func (s *Script) script(src string, fr frame, depth int) bool {
	if depth >= maxDepth {
		return false
	}
	f, err := parse(src)
	if err != nil {
		return false
	}
	s.walk(f, resolver{src: src}, fr, depth+1)
	return true
}

// baseName is the program name a wrapper or rule would know: the last
// element of a path.
func baseName(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	return path.Base(s)
}

// safeEnvNames are variables whose value cannot change which program runs
// or make it run other code.
var safeEnvNames = map[string]bool{
	"LANG": true, "LANGUAGE": true, "TZ": true, "NO_COLOR": true, "FORCE_COLOR": true,
	"CLICOLOR": true, "CLICOLOR_FORCE": true, "COLUMNS": true, "LINES": true, "TERM": true,
	"POSIXLY_CORRECT": true, "GIT_TERMINAL_PROMPT": true,
}

func safeEnv(name string) bool {
	return safeEnvNames[name] || strings.HasPrefix(name, "LC_")
}

// SplitWords parses line as one simple command and returns its words as
// written — variable assignments in front included, wrappers not looked
// through — with quoting removed. It fails for anything else: several
// commands, redirections, control structures, a syntax error. Permission
// rules use it to read the command a rule names.
func SplitWords(line string) ([]Word, error) {
	f, err := parse(line)
	if err != nil {
		return nil, err
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("bashcmd: %d commands, want one", len(f.Stmts))
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(st.Redirs) > 0 || st.Background || st.Negated || st.Coprocess || st.Disown {
		return nil, fmt.Errorf("bashcmd: not a simple command")
	}
	r := resolver{src: line}
	var words []Word
	for _, as := range call.Assigns {
		words = append(words, assignWord(as, r))
	}
	for _, w := range call.Args {
		words = append(words, r.word(w))
	}
	return words, nil
}
