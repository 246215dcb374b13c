package search

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Tools returns the Glob and Grep tools with default settings.
func Tools() []tool.Tool {
	return []tool.Tool{&Glob{}, &Grep{}}
}

const msgNoWorkspace = "This session has no file access configured."

// decode unmarshals a schema-valid input into v.
func decode(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, v); err != nil {
		return tool.Invalid(fmt.Sprintf("The input could not be decoded: %v", err))
	}
	return nil
}

// searchRoot resolves the directory or file to search: path, or the
// working directory when path is empty. missing formats the message for a
// path that does not exist, given its absolute form.
func searchRoot(env *tool.Env, path string, missing func(abs string) string) (workspace.Path, fs.FileInfo, error) {
	if env.Files == nil {
		return workspace.Path{}, nil, tool.Invalid(msgNoWorkspace)
	}
	if path == "" {
		path = env.Cwd()
	}
	p, err := env.Files.Resolve(path, env.Cwd())
	if err != nil {
		return p, nil, asToolError(err)
	}
	fi, err := env.Files.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return p, nil, tool.Invalid(missing(p.Abs))
	case err != nil:
		var de *workspace.DeniedError
		if errors.As(err, &de) {
			return p, nil, &tool.DeniedError{Msg: de.Msg}
		}
		return p, nil, tool.Invalid(err.Error())
	}
	return p, fi, nil
}

// asToolError converts the workspace's refusal into the executor's
// vocabulary and leaves other errors alone.
func asToolError(err error) error {
	var de *workspace.DeniedError
	if errors.As(err, &de) {
		return &tool.DeniedError{Msg: de.Msg}
	}
	return err
}

// failed turns an error from a check into the result the executor would
// have produced had Validate returned it.
func failed(err error) *tool.Result {
	var de *tool.DeniedError
	if errors.As(err, &de) {
		return tool.UseError(tool.OutcomeSandboxDenied, de.Msg)
	}
	var ie *tool.InputError
	if errors.As(err, &ie) {
		return tool.UseError(tool.OutcomeInvalidInput, ie.Msg)
	}
	return tool.Error(err.Error())
}

// display returns abs relative to cwd when it lies below it, else abs, as
// quoteName shows it.
func display(abs, cwd string) string {
	if rel, ok := strings.CutPrefix(abs, strings.TrimSuffix(cwd, "/")+"/"); ok {
		return quoteName(rel)
	}
	return quoteName(abs)
}

// quoteName returns a path as Glob and Grep show it, one to a line: as it
// is, unless it could pass for something else. A path with a control
// character (a newline would fake a second entry), a byte that is not
// UTF-8, a Unicode line or paragraph separator, or a leading double quote
// is shown as a double-quoted string with Go's backslash escapes (\n,
// \t, \", \\, \xff, \u2028). A path shown as it is never starts with
// a double quote and a quoted one always does, so no two paths look alike.
func quoteName(p string) string {
	if !needsQuotes(p) {
		return p
	}
	return strconv.Quote(p)
}

func needsQuotes(p string) bool {
	if strings.HasPrefix(p, `"`) || !utf8.ValidString(p) {
		return true
	}
	for _, r := range p {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// quotingNote is the sentence tool descriptions use to say so.
const quotingNote = `A path that holds a control character (such as a newline), a byte that is not UTF-8, or starts with a double quote is shown as a double-quoted string with backslash escapes (\n, \t, \", \\, \xff), so that each line is one path; other paths are shown as they are.`

// pageOf applies offset and head_limit to entries. limit 0 means no limit.
// It returns the page and whether anything was left out.
func pageOf[T any](entries []T, offset, limit int) ([]T, bool) {
	offset = min(max(offset, 0), len(entries))
	page := entries[offset:]
	if limit > 0 && len(page) > limit {
		page = page[:limit]
	}
	return page, len(page) < len(entries)
}
