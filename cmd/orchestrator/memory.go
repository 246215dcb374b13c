package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// instructionFile is one CLAUDE.md file read for the system prompt.
type instructionFile struct {
	path, scope, text string
}

// loadInstructions reads the CLAUDE.md files Claude Code gives the model:
// the user's (userDir/CLAUDE.md, userDir being ~/.claude), then the
// project's — CLAUDE.md, .claude/CLAUDE.md and CLAUDE.local.md — in each
// directory from the repository root (the nearest directory above
// projectDir holding .git; without one, the top directory under /) down
// to projectDir itself, so that the nearest file comes last and has the
// last word. Missing and empty files are skipped; one that cannot be read
// is logged and skipped.
func loadInstructions(userDir, projectDir string, log *slog.Logger) []instructionFile {
	var out []instructionFile
	seen := map[string]bool{}
	add := func(path, scope string) {
		if seen[path] {
			return
		}
		seen[path] = true
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) && pe.Op == "read" { // a directory named CLAUDE.md
				return
			}
			log.Warn("CLAUDE.md not read", "path", path, "err", err)
			return
		}
		if text := strings.TrimSpace(string(b)); text != "" {
			out = append(out, instructionFile{path: path, scope: scope, text: text})
		}
	}
	if userDir != "" {
		add(filepath.Join(userDir, "CLAUDE.md"), "the user's instructions for every project")
	}
	if projectDir == "" {
		return out
	}
	var dirs []string // projectDir first, up to the repository root
	for dir := filepath.Clean(projectDir); ; {
		if dir == string(filepath.Separator) {
			break // Claude Code stops below /
		}
		dirs = append(dirs, dir)
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	slices.Reverse(dirs)
	for _, dir := range dirs {
		add(filepath.Join(dir, "CLAUDE.md"), "the project's instructions")
		add(filepath.Join(dir, ".claude", "CLAUDE.md"), "the project's instructions")
		add(filepath.Join(dir, "CLAUDE.local.md"), "the user's own instructions for this project")
	}
	return out
}

// instructionsPrompt renders CLAUDE.md files as a section of the system
// prompt; none gives "".
func instructionsPrompt(files []instructionFile) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Instructions from CLAUDE.md files\n\n")
	b.WriteString("The user and the project keep standing instructions in these files. Follow them: where they differ from the defaults above, they win, and a file listed later (nearer the working directory) wins over an earlier one.")
	for _, f := range files {
		fmt.Fprintf(&b, "\n\n## %s (%s)\n\n%s", f.path, f.scope, f.text)
	}
	return b.String()
}
