package main

import (
	"log/slog"
	"path/filepath"

	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
)

// loadAgents reads the user-defined subagent types: those of the user's
// configuration directory (agents/*.md), then the project's
// (.claude/agents/*.md), which win over the user's of the same name. An
// empty directory argument is skipped.
func loadAgents(userDir, project string, log *slog.Logger) []agents.Definition {
	var dirs []string
	if userDir != "" {
		dirs = append(dirs, filepath.Join(userDir, "agents"))
	}
	if project != "" {
		dirs = append(dirs, filepath.Join(project, ".claude", "agents"))
	}
	return agents.Load(log, dirs...)
}
