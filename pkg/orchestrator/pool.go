package orchestrator

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
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
