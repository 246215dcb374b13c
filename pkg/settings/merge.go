package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
)

// Source is one layer of settings: the text of a settings file, or JSON
// given inline on a command line.
type Source struct {
	// Name says where the text came from, in errors: a file's path, or a
	// flag such as "--settings".
	Name string
	// Data is the JSON text.
	Data []byte
}

// The settings files of Claude Code, relative to the user's configuration
// directory (~/.claude) and to a project's directory.
const (
	UserFile         = "settings.json"
	ProjectFile      = ".claude/settings.json"
	ProjectLocalFile = ".claude/settings.local.json"
)

// Discover reads the settings files Claude Code layers, lowest precedence
// first: the user's (userDir/settings.json), the project's shared
// (projectDir/.claude/settings.json) and the project's local
// (projectDir/.claude/settings.local.json). A file that does not exist is
// skipped, as is a directory given as "". A file that exists but cannot
// be read is an error.
func Discover(userDir, projectDir string) ([]Source, error) {
	var paths []string
	if userDir != "" {
		paths = append(paths, filepath.Join(userDir, UserFile))
	}
	if projectDir != "" {
		paths = append(paths, filepath.Join(projectDir, ProjectFile), filepath.Join(projectDir, ProjectLocalFile))
	}
	var out []Source
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue // the project is the user's configuration directory's parent: read once
		}
		seen[p] = true
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("settings: %w", err)
		}
		out = append(out, Source{Name: p, Data: data})
	}
	return out, nil
}

// Merge parses sources, lowest precedence first, and layers them the way
// Claude Code layers its settings files: objects merge key by key, so a
// key only one source sets keeps its value; lists concatenate, earlier
// sources' entries first, with a repeated string, number or boolean kept
// once, so the permission rules and hooks of every source apply; any other
// value of a later source replaces an earlier one (permissions.defaultMode,
// say). Each source is checked on its own first, so an error names the
// source and the line of the mistake.
func Merge(sources ...Source) (Settings, error) {
	var merged any
	for _, src := range sources {
		if _, err := ParseSettings(src.Data); err != nil {
			var se *Error
			if errors.As(err, &se) {
				se.File = src.Name
			}
			return Settings{}, err
		}
		var v any
		if err := json.Unmarshal(src.Data, &v); err != nil {
			return Settings{}, &Error{File: src.Name, Err: err} // ParseSettings accepted it: not reached
		}
		merged = mergeJSON(merged, v)
	}
	if merged == nil {
		return Settings{}, nil
	}
	data, err := json.Marshal(merged)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: merge: %w", err)
	}
	s, err := ParseSettings(data)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: the merged settings are invalid: %w", err)
	}
	return s, nil
}

// mergeJSON layers higher over lower (decoded JSON values).
func mergeJSON(lower, higher any) any {
	switch h := higher.(type) {
	case map[string]any:
		l, ok := lower.(map[string]any)
		if !ok {
			return h
		}
		out := make(map[string]any, len(l)+len(h))
		for k, v := range l {
			out[k] = v
		}
		for k, v := range h {
			out[k] = mergeJSON(l[k], v)
		}
		return out
	case []any:
		l, ok := lower.([]any)
		if !ok {
			return h
		}
		out := append([]any(nil), l...)
		for _, v := range h {
			if isScalar(v) && containsScalar(out, v) {
				continue
			}
			out = append(out, v)
		}
		return out
	}
	return higher
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, float64, bool:
		return true
	}
	return false
}

func containsScalar(list []any, v any) bool {
	for _, x := range list {
		if isScalar(x) && reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}
