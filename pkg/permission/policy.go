package permission

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolwire/toolwire/pkg/bashcmd"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Mode is the permission mode: what happens to calls no rule decides.
type Mode string

// The permission modes, named as in Claude Code's settings.
const (
	// ModeDefault allows read-only tools and asks for everything else.
	ModeDefault Mode = "default"
	// ModeAcceptEdits also allows file edits inside the workspace.
	ModeAcceptEdits Mode = "acceptEdits"
	// ModePlan allows read-only tools and denies everything else.
	ModePlan Mode = "plan"
	// ModeBypass allows everything no deny or ask rule stops.
	ModeBypass Mode = "bypassPermissions"
)

// ParseMode checks a mode name; "" is allowed and means unset.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", ModeDefault, ModeAcceptEdits, ModePlan, ModeBypass:
		return m, nil
	}
	return "", fmt.Errorf("unknown permission mode %q (want default, acceptEdits, plan or bypassPermissions)", s)
}

// ErrBypassDisabled is returned by Compile when a session asks for
// bypassPermissions and the operator has disabled it.
var ErrBypassDisabled = errors.New("bypassPermissions mode is disabled by the operator")

// Rules are one party's permission settings.
type Rules struct {
	// Allow, Ask and Deny are rules such as "Bash(npm test:*)".
	Allow, Ask, Deny []string
	// Mode is the permission mode. For the operator it is the default of
	// sessions that set none.
	Mode Mode
	// DisableBypass, set by the operator, refuses sessions in
	// bypassPermissions mode (Claude Code's
	// permissions.disableBypassPermissionsMode: "disable"). It has no
	// effect in a session's Rules.
	DisableBypass bool
}

// Origin says who set what decided a call.
type Origin int

const (
	// OriginMode: the permission mode decided.
	OriginMode Origin = iota
	// OriginOperator: a rule of the executor's operator decided.
	OriginOperator
	// OriginSession: a rule of the session decided.
	OriginSession
)

// String returns "mode", "operator" or "session".
func (o Origin) String() string {
	switch o {
	case OriginOperator:
		return "operator"
	case OriginSession:
		return "session"
	}
	return "mode"
}

// Behavior is what a decision says to do with a call.
type Behavior int

const (
	// Allow runs the call.
	Allow Behavior = iota
	// Ask asks the client first.
	Ask
	// Deny refuses the call; the model is told why.
	Deny
)

// String returns "allow", "ask" or "deny".
func (b Behavior) String() string {
	switch b {
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "allow"
}

// Request is a call to decide on.
type Request struct {
	// Tool is the tool's name.
	Tool string
	// Input is the schema-valid input object.
	Input json.RawMessage
	// Cwd is the session shell's current directory, against which relative
	// paths in the input are resolved.
	Cwd string
	// Workspace is the session's workspace directory, against which
	// relative path rules are anchored.
	Workspace string
	// AddDirs are further directories the session works in (--add-dir):
	// the modes treat paths in them as in the workspace.
	AddDirs []string
	// ReadOnly is true for a tool that never changes anything (its
	// Spec.ReadOnly). Bash is judged from its command instead.
	ReadOnly bool
	// Home is what "~" at the start of a path in the input stands for,
	// as the tool will take it (the workspace's home directory); empty
	// means the policy's own, the one "~/" in rules stands for.
	Home string
}

// Decision is the outcome of Decide.
type Decision struct {
	// Behavior is allow, ask or deny.
	Behavior Behavior
	// Rule is what decided: the rule as written, several allow rules
	// joined by ", " when the commands of one Bash line needed different
	// ones, or "mode:<mode>" when no rule applied.
	Rule string
	// Origin says who set Rule.
	Origin Origin
	// Reason explains the decision: to the model on deny, to the client on
	// ask.
	Reason string
	// Suggestion is a rule that would allow calls like this one, for the
	// client's "allow always"; empty when no rule can.
	Suggestion string
}

// entry is a compiled rule and who set it.
type entry struct {
	rule   Rule
	origin Origin
}

// Policy is a compiled set of permission rules and a mode. It is immutable
// and safe for concurrent use.
type Policy struct {
	deny, ask, allow []entry
	mode             Mode
	home             string
	operator         Rules
	session          Rules
}

// Compile builds the policy of a session from the operator's rules and the
// session's. A rule that does not parse gives an error naming it; a
// session asking for bypassPermissions when the operator disabled it gives
// ErrBypassDisabled.
func Compile(operator, session Rules) (*Policy, error) {
	home, _ := os.UserHomeDir() // "~/" rules fail to compile without one
	return compile(operator, session, home)
}

func compile(operator, session Rules, home string) (*Policy, error) {
	p := &Policy{home: home, operator: cloneRules(operator), session: cloneRules(session)}
	for _, m := range []Mode{operator.Mode, session.Mode} {
		if _, err := ParseMode(string(m)); err != nil {
			return nil, fmt.Errorf("permission: %w", err)
		}
	}
	p.mode = ModeDefault
	if operator.Mode != "" {
		p.mode = operator.Mode
	}
	if session.Mode != "" {
		p.mode = session.Mode
	}
	if p.mode == ModeBypass && operator.DisableBypass {
		return nil, fmt.Errorf("permission: %w", ErrBypassDisabled)
	}
	lists := []struct {
		dst    *[]entry
		rules  []string
		origin Origin
		name   string
	}{
		{&p.deny, operator.Deny, OriginOperator, "operator deny"},
		{&p.deny, session.Deny, OriginSession, "deny"},
		{&p.ask, operator.Ask, OriginOperator, "operator ask"},
		{&p.ask, session.Ask, OriginSession, "ask"},
		{&p.allow, operator.Allow, OriginOperator, "operator allow"},
		{&p.allow, session.Allow, OriginSession, "allow"},
	}
	for _, l := range lists {
		for _, text := range l.rules {
			r, err := parseRule(text, home)
			if err != nil {
				return nil, fmt.Errorf("permission: %s rule %q: %w", l.name, text, err)
			}
			*l.dst = append(*l.dst, entry{rule: r, origin: l.origin})
		}
	}
	return p, nil
}

func cloneRules(r Rules) Rules {
	r.Allow = append([]string(nil), r.Allow...)
	r.Ask = append([]string(nil), r.Ask...)
	r.Deny = append([]string(nil), r.Deny...)
	return r
}

// Mode returns the policy's permission mode.
func (p *Policy) Mode() Mode { return p.mode }

// WithAllow returns a new policy with rule added to the session's allow
// rules, for "allow always". p itself does not change.
func (p *Policy) WithAllow(rule string) (*Policy, error) {
	session := cloneRules(p.session)
	session.Allow = append(session.Allow, rule)
	return compile(p.operator, session, p.home)
}

// call is a request with its input read once.
type call struct {
	Request
	tool     string
	path     string // absolute, cleaned; file tools only
	command  string // Bash only
	script   *bashcmd.Script
	parseErr error
	url      string // WebFetch only
	readOnly bool
}

// input holds the fields of tool inputs that rules look at.
type input struct {
	FilePath     string `json:"file_path"`
	NotebookPath string `json:"notebook_path"`
	Path         string `json:"path"`
	Command      string `json:"command"`
	URL          string `json:"url"`
}

func newCall(req Request, home string) *call {
	c := &call{Request: req, tool: canonicalTool(req.Tool), readOnly: req.ReadOnly}
	var in input
	_ = json.Unmarshal(req.Input, &in) // schema-checked; a bad input just lacks fields
	switch {
	case c.tool == "Bash":
		c.command = in.Command
		c.script, c.parseErr = bashcmd.Parse(in.Command)
		c.readOnly = c.parseErr == nil && c.script.ReadOnly()
	case isFileTool(c.tool):
		p := in.FilePath
		if p == "" {
			p = in.NotebookPath
		}
		if p == "" && (c.tool == "Glob" || c.tool == "Grep") {
			p = in.Path
			if p == "" {
				p = req.Cwd
			}
		}
		if p != "" {
			// The file the tool will open: "~/.ssh/id_rsa" is in the home
			// directory, not below cwd.
			c.path = workspace.Abs(p, req.Cwd, cmp.Or(req.Home, home))
		}
	case c.tool == "WebFetch":
		c.url = in.URL
	}
	return c
}

// inWorkspace reports whether the call's path lies inside the workspace or
// an added directory.
func (c *call) inWorkspace() bool {
	if c.path == "" {
		return false
	}
	for _, dir := range append([]string{c.Workspace}, c.AddDirs...) {
		if dir == "" {
			continue
		}
		rel, err := filepath.Rel(filepath.Clean(dir), c.path)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

// Decide decides on a call: deny rules, plan mode, ask rules, allow rules,
// then the mode's default.
func (p *Policy) Decide(req Request) Decision {
	c := newCall(req, p.home)
	var doubt *entry // a deny rule that may apply
	var doubtWhat string
	for i := range p.deny {
		e := &p.deny[i]
		m, what := e.rule.matchCall(c, false)
		if m == fullMatch {
			return Decision{Behavior: Deny, Rule: e.rule.Text, Origin: e.origin, Reason: deniedReason(c, e, what)}
		}
		if m == maybeMatch && doubt == nil {
			doubt, doubtWhat = e, what
		}
	}
	if p.mode == ModePlan && !c.readOnly {
		return Decision{
			Behavior: Deny,
			Rule:     "mode:" + string(ModePlan),
			Origin:   OriginMode,
			Reason: fmt.Sprintf("Plan mode is on: only read-only tools may run, and this %s call could change something. "+
				"Keep exploring with read-only tools, then present your plan instead of carrying it out.", c.tool),
		}
	}
	for i := range p.ask {
		e := &p.ask[i]
		if m, what := e.rule.matchCall(c, false); m != noMatch {
			// No allow rule gets past an ask rule: nothing to suggest.
			return Decision{Behavior: Ask, Rule: e.rule.Text, Origin: e.origin,
				Reason: fmt.Sprintf("rule %s asks before %s", e.rule.Text, describe(c, what))}
		}
	}
	if doubt != nil {
		return Decision{Behavior: Ask, Rule: doubt.rule.Text, Origin: doubt.origin,
			Reason: fmt.Sprintf("cannot tell whether rule %s denies %s; the command hides part of what it runs", doubt.rule.Text, describe(c, doubtWhat))}
	}
	if d, ok := p.allowed(c); ok {
		return d
	}
	return p.modeDefault(c)
}

// allowed checks the allow rules. A Bash line needs an allow rule for each
// of its commands, and no effects (file redirections, variables, function
// definitions) a rule for its commands would not cover.
func (p *Policy) allowed(c *call) (Decision, bool) {
	if c.tool == "Bash" {
		for i := range p.allow {
			e := &p.allow[i]
			if e.rule.kind == kindTool && e.rule.appliesTo("Bash") {
				return Decision{Behavior: Allow, Rule: e.rule.Text, Origin: e.origin}, true
			}
		}
		if c.parseErr != nil || len(c.script.Commands) == 0 || len(c.script.Effects) > 0 {
			return Decision{}, false
		}
		var used []string
		origin := OriginOperator
		for _, cmd := range c.script.Commands {
			e := p.allowBash(cmd)
			if e == nil {
				return Decision{}, false
			}
			if !contains(used, e.rule.Text) {
				used = append(used, e.rule.Text)
			}
			if e.origin == OriginSession {
				origin = OriginSession
			}
		}
		return Decision{Behavior: Allow, Rule: strings.Join(used, ", "), Origin: origin}, true
	}
	for i := range p.allow {
		e := &p.allow[i]
		if m, _ := e.rule.matchCall(c, true); m == fullMatch {
			return Decision{Behavior: Allow, Rule: e.rule.Text, Origin: e.origin}, true
		}
	}
	return Decision{}, false
}

// allowBash returns the first allow rule that covers cmd.
func (p *Policy) allowBash(cmd bashcmd.Command) *entry {
	if cmd.Opaque || cmd.Dynamic() {
		return nil
	}
	for i := range p.allow {
		e := &p.allow[i]
		if e.rule.kind != kindBash {
			continue
		}
		if !cmd.Privileged && e.rule.bash.match(cmd.Words) == fullMatch {
			return e
		}
		if e.rule.bash.match(cmd.Full) == fullMatch {
			return e
		}
	}
	return nil
}

// modeDefault decides a call no rule decided.
func (p *Policy) modeDefault(c *call) Decision {
	d := Decision{Rule: "mode:" + string(p.mode), Origin: OriginMode}
	switch {
	case p.mode == ModeBypass:
		d.Behavior = Allow
	case c.readOnly && isReadTool(c.tool) && c.path != "" && (c.Workspace != "" || len(c.AddDirs) > 0) && !c.inWorkspace():
		d.Behavior = Ask
		d.Reason = fmt.Sprintf("%s reads %s, outside the workspace", c.tool, c.path)
		d.Suggestion = p.suggest(c)
	case c.readOnly:
		d.Behavior = Allow
	case p.mode == ModeAcceptEdits && isEditTool(c.tool) && c.inWorkspace():
		d.Behavior = Allow
	default:
		d.Behavior = Ask
		d.Reason = fmt.Sprintf("%s in %s mode asks before %s", c.tool, p.mode, describe(c, ""))
		d.Suggestion = p.suggest(c)
	}
	return d
}

// maxShown bounds how much of a command a message quotes.
const maxShown = 300

func shorten(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// describe says what the call does, for messages: what is the part of a
// Bash line a rule was about.
func describe(c *call, what string) string {
	switch {
	case c.tool == "Bash":
		if what == "" || what == c.command {
			return "running: " + shorten(c.command)
		}
		return fmt.Sprintf("running %s in: %s", shorten(what), shorten(c.command))
	case isEditTool(c.tool) && c.path != "":
		return "changing " + c.path
	case isReadTool(c.tool) && c.path != "":
		return "reading " + c.path
	case c.url != "":
		return "fetching " + c.url
	}
	return "using " + c.tool
}

func deniedReason(c *call, e *entry, what string) string {
	by := "rule " + e.rule.Text
	if e.origin == OriginOperator {
		by += " (set by the operator)"
	}
	switch {
	case c.tool == "Bash":
		cmd := shorten(c.command)
		if what != "" && what != c.command {
			cmd = fmt.Sprintf("%s (the part %s)", cmd, shorten(what))
		}
		return fmt.Sprintf("Permission denied by %s: Bash may not run the command %s", by, cmd)
	case c.path != "":
		return fmt.Sprintf("Permission denied by %s: %s may not be used on %s", by, c.tool, c.path)
	case c.url != "":
		return fmt.Sprintf("Permission denied by %s: %s may not fetch %s", by, c.tool, c.url)
	}
	return fmt.Sprintf("Permission denied by %s: the %s tool may not be used", by, c.tool)
}
