package orchestrator

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/tool"
)

// externalToolPrefix marks tools that are not built into the executor
// (Claude Code's convention for MCP tools).
const externalToolPrefix = "mcp__"

// toolPool returns the tools to offer the model: the executor's tools minus
// the disallowed ones (and, when allowed is set, only those), built-in tools
// first, each group sorted by name. A stable order keeps the prompt cache
// warm; keeping built-ins as one prefix means an added external tool does
// not move them.
//
// Allowing Bash allows the tools that watch and stop the background shells
// it starts, TaskOutput and TaskStop, unless they are disallowed.
func toolPool(defs []execapi.ToolInfo, allowed, disallowed []string) []model.Tool {
	allow := nameSet(allowed)
	deny := nameSet(disallowed)
	if allow["Bash"] {
		allow["TaskOutput"], allow["TaskStop"] = true, true
	}
	var pool []model.Tool
	for _, d := range defs {
		if deny[d.Name] || (len(allow) > 0 && !allow[d.Name]) {
			continue
		}
		schema := d.InputSchema
		if !json.Valid(schema) {
			schema = nil
		}
		pool = append(pool, model.Tool{Name: d.Name, Description: d.Description, InputSchema: schema})
	}
	slices.SortStableFunc(pool, func(a, b model.Tool) int {
		ea, eb := strings.HasPrefix(a.Name, externalToolPrefix), strings.HasPrefix(b.Name, externalToolPrefix)
		if ea != eb {
			if ea {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return pool
}

// nameSet returns the bare tool names of rules: "Bash(git:*)" restricts how a
// tool may be used, not whether it is offered, so it is skipped here.
func nameSet(rules []string) map[string]bool {
	set := map[string]bool{}
	for _, r := range rules {
		r = strings.TrimSpace(r)
		if r != "" && !strings.Contains(r, "(") {
			set[r] = true
		}
	}
	return set
}

// mcpPool returns the MCP tools to offer the model, sorted by name: the
// session's MCP tools (from Hello or McpToolsChanged) minus those a bare
// disallowed rule names: "mcp__server" and "mcp__server__*" name every
// tool of a server, "mcp__server__tool" one. Allowed names restrict MCP
// tools only when some of them are MCP rules: a list of built-in tools
// (--tools) leaves the MCP tools the session configured on offer.
func mcpPool(specs []tool.Spec, allowed, disallowed []string) []model.Tool {
	var allow, deny []string
	for r := range nameSet(allowed) {
		if strings.HasPrefix(r, externalToolPrefix) {
			allow = append(allow, r)
		}
	}
	for r := range nameSet(disallowed) {
		if strings.HasPrefix(r, externalToolPrefix) {
			deny = append(deny, r)
		}
	}
	var pool []model.Tool
	for _, sp := range specs {
		if matchesAny(deny, sp.Name) || (len(allow) > 0 && !matchesAny(allow, sp.Name)) {
			continue
		}
		schema := sp.InputSchema
		if !json.Valid(schema) {
			schema = nil
		}
		pool = append(pool, model.Tool{Name: sp.Name, Description: sp.Description, InputSchema: schema})
	}
	slices.SortFunc(pool, func(a, b model.Tool) int { return cmp.Compare(a.Name, b.Name) })
	return pool
}

// mcpRuleMatches reports whether the bare rule names the MCP tool name:
// the name itself, or its server ("mcp__server", "mcp__server__*"), as
// permission rules read them.
func mcpRuleMatches(rule, name string) bool {
	if rule == name {
		return true
	}
	server := strings.TrimSuffix(strings.TrimSuffix(rule, "*"), "__")
	return strings.Count(server, "__") == 1 && strings.HasPrefix(name, server+"__")
}

func matchesAny(rules []string, name string) bool {
	for _, r := range rules {
		if mcpRuleMatches(r, name) {
			return true
		}
	}
	return false
}

// offer joins the built-in tools and the MCP tools into the list sent to
// the model, built-ins first, with the prompt-cache breakpoint on the last
// built-in tool: adding, removing or changing an MCP tool then leaves the
// cached prefix of built-in tools as it was (Claude Code does the same).
func offer(builtins, mcp []model.Tool) []model.Tool {
	out := make([]model.Tool, 0, len(builtins)+len(mcp))
	out = append(out, builtins...)
	if n := len(out); n > 0 {
		out[n-1].CacheBreakpoint = true
	}
	return append(out, mcp...)
}
