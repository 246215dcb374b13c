// Package agents describes the subagents a conversation can start with
// Claude Code's Agent tool: the built-in types (general-purpose and the
// read-only Explore), user-defined ones read from .claude/agents/*.md files
// the way Claude Code reads them, the Agent tool's input schema and the
// result the parent model reads.
//
// Running a subagent is the orchestrator's job; this package only knows
// what a subagent is and which tools it may use.
package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ToolName is the name of the tool that starts a subagent. TaskAlias is
// the name Claude Code gave it before; calls by that name are taken too.
const (
	ToolName  = "Agent"
	TaskAlias = "Task"
)

// Built-in agent types.
const (
	GeneralPurpose = "general-purpose"
	Explore        = "Explore"
)

// Definition is one agent type.
type Definition struct {
	// Name is what subagent_type names.
	Name string
	// Description tells the parent model when to use it.
	Description string
	// Tools, when not nil, are the only tools the agent may use, by name
	// (a subset of the conversation's); nil means all of them.
	Tools []string
	// Model is the model the agent asks, or "" (and "inherit") for the
	// conversation's.
	Model string
	// Prompt is the agent's system prompt.
	Prompt string
	// Source is where it was defined: "built-in", or the file.
	Source string
}

// readOnlyTools are the tools the Explore agent gets: those that read and
// search and cannot change a file. Bash is not among them: a shell can
// write, and a prompt asking it not to is no guarantee.
var readOnlyTools = []string{"Glob", "Grep", "Read", "TaskGet", "TaskList", "WebFetch", "WebSearch"}

// BuiltIn returns the built-in agent types.
func BuiltIn() []Definition {
	return []Definition{
		{
			Name: GeneralPurpose, Source: "built-in",
			Description: "General-purpose agent for researching complex questions, searching for code, and executing multi-step tasks. " +
				"Use it when a search or a piece of work may take several rounds of tool calls.",
			Prompt: "You are an agent started by another agent to carry out one task with the tools you have. " +
				"Do the whole task, neither more nor less. When you are done, answer with a concise report of what you found " +
				"or did: the agent that started you reads only your final message, not your tool calls. Give absolute file paths " +
				"and quote the code or output that matters.",
		},
		{
			Name: Explore, Source: "built-in", Tools: readOnlyTools,
			Description: "Fast read-only agent for exploring a codebase: finding files by pattern, searching code for keywords, " +
				"and answering questions about how the code works. It cannot change files.",
			Prompt: "You are a read-only agent that explores a codebase to answer a question. You can find files, search their " +
				"contents and read them; you cannot create, change or delete anything. Search broadly first, then read what " +
				"matters. Answer with a concise report: the absolute paths of the relevant files, and the facts the question asks for.",
		},
	}
}

// Parse reads an agent file: YAML front matter between --- lines (name,
// description, tools as a comma-separated string or a list, model) and
// the system prompt after it.
func Parse(data []byte) (Definition, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return Definition{}, errors.New("no front matter: the file must start with a --- line")
	}
	front, body, ok := strings.Cut(text[len("---\n"):], "\n---")
	if !ok {
		return Definition{}, errors.New("front matter is not closed by a --- line")
	}
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = ""
	}
	var fm struct {
		Name        string    `yaml:"name"`
		Description string    `yaml:"description"`
		Tools       yaml.Node `yaml:"tools"`
		Model       string    `yaml:"model"`
	}
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return Definition{}, fmt.Errorf("front matter: %w", err)
	}
	d := Definition{Name: strings.TrimSpace(fm.Name), Description: strings.TrimSpace(fm.Description),
		Model: strings.TrimSpace(fm.Model), Prompt: strings.TrimSpace(body)}
	switch {
	case d.Name == "":
		return Definition{}, errors.New("front matter has no name")
	case d.Description == "":
		return Definition{}, errors.New("front matter has no description")
	}
	if d.Model == "inherit" {
		d.Model = ""
	}
	switch fm.Tools.Kind {
	case 0: // absent: every tool
	case yaml.ScalarNode:
		d.Tools = []string{}
		for t := range strings.SplitSeq(fm.Tools.Value, ",") {
			if t = strings.TrimSpace(t); t != "" {
				d.Tools = append(d.Tools, t)
			}
		}
		if strings.TrimSpace(fm.Tools.Value) == "*" {
			d.Tools = nil
		}
	case yaml.SequenceNode:
		d.Tools = []string{}
		if err := fm.Tools.Decode(&d.Tools); err != nil {
			return Definition{}, fmt.Errorf("front matter tools: %w", err)
		}
	default:
		return Definition{}, errors.New("front matter tools: want a comma-separated string or a list of names")
	}
	return d, nil
}

// Load reads the agent files (*.md) of dirs, later directories' agents
// overriding earlier ones' of the same name (Claude Code: user
// ~/.claude/agents first, then the project's .claude/agents). A file that
// cannot be read or parsed is logged and skipped; a missing directory is
// no error.
func Load(log *slog.Logger, dirs ...string) []Definition {
	byName := map[string]Definition{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.md"))
		if err != nil {
			continue
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				var d Definition
				if d, err = Parse(data); err == nil {
					d.Source = f
					byName[d.Name] = d
					continue
				}
			}
			log.Warn("skip agent file", "file", f, "err", err)
		}
	}
	out := make([]Definition, 0, len(byName))
	for _, d := range byName {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Definition) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Set is the agent types of a conversation: the built-in ones and the
// user-defined ones, which override a built-in of the same name.
type Set struct{ defs []Definition }

// NewSet returns the built-in types with user added.
func NewSet(user []Definition) *Set {
	defs := BuiltIn()
	for _, u := range user {
		if i := slices.IndexFunc(defs, func(d Definition) bool { return d.Name == u.Name }); i >= 0 {
			defs[i] = u
		} else {
			defs = append(defs, u)
		}
	}
	return &Set{defs: defs}
}

// Lookup returns the type named name ("" is general-purpose).
func (s *Set) Lookup(name string) (Definition, bool) {
	if name == "" {
		name = GeneralPurpose
	}
	i := slices.IndexFunc(s.defs, func(d Definition) bool { return d.Name == name })
	if i < 0 {
		return Definition{}, false
	}
	return s.defs[i], true
}

// Names returns the names of every type.
func (s *Set) Names() []string {
	out := make([]string, len(s.defs))
	for i, d := range s.defs {
		out[i] = d.Name
	}
	return out
}

// ToolsFor returns the tools of offered (the conversation's, by name) that
// an agent of type d may use: all but the Agent tool itself, narrowed to
// d.Tools when set.
func ToolsFor(d Definition, offered []string) []string {
	var out []string
	for _, name := range offered {
		if name == ToolName || name == TaskAlias {
			continue
		}
		if d.Tools != nil && !slices.Contains(d.Tools, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// Description returns the Agent tool's description, naming every type.
func (s *Set) Description() string {
	var b strings.Builder
	b.WriteString("Launch a subagent: a new agent with its own context that carries out a task with its own tools and " +
		"reports back. Its final message is this tool's result; you see nothing else of its work, so ask in prompt for " +
		"exactly what you need back, with all the context it needs. Several Agent calls in one message run at the same " +
		"time. Agent types (subagent_type):\n")
	for _, d := range s.defs {
		tools := "all tools"
		if d.Tools != nil {
			tools = strings.Join(d.Tools, ", ")
		}
		fmt.Fprintf(&b, "- %s: %s (Tools: %s)\n", d.Name, d.Description, tools)
	}
	return strings.TrimRight(b.String(), "\n")
}

// InputSchema is the Agent tool's input schema.
const InputSchema = `{"type":"object","properties":{"description":{"type":"string"},"prompt":{"type":"string"},` +
	`"subagent_type":{"type":"string"},"model":{"type":"string","enum":["sonnet","opus","haiku"]}},` +
	`"required":["description","prompt"],"additionalProperties":false}`

// Input is the Agent tool's input.
type Input struct {
	Description  string `json:"description"`
	Prompt       string `json:"prompt"`
	SubagentType string `json:"subagent_type"`
	Model        string `json:"model"`
}

// ParseInput decodes input that passed the schema.
func ParseInput(raw json.RawMessage) (Input, error) {
	var in Input
	err := json.Unmarshal(raw, &in)
	return in, err
}

// Usage is what a subagent's run cost, for the result's trailer.
type Usage struct {
	TotalTokens int64
	ToolUses    int
	DurationMS  int64
}

// Trailer returns the text block Claude Code adds after a subagent's
// answer: its id and what the run took.
func Trailer(agentID string, u Usage) string {
	return fmt.Sprintf("agentId: %s\n<usage>total_tokens: %d\ntool_uses: %d\nduration_ms: %d</usage>",
		agentID, u.TotalTokens, u.ToolUses, u.DurationMS)
}
