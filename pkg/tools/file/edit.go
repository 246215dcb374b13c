package file

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/pkg/tool"
)

// Edit is the Edit tool: replace an exact string in a file.
type Edit struct{}

var _ tool.Tool = (*Edit)(nil)

type editInput struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// Spec describes Edit.
func (e *Edit) Spec() tool.Spec {
	return tool.Spec{
		Name:        "Edit",
		Description: editDescription,
		InputSchema: json.RawMessage(editSchema),
		Concurrency: tool.ConcurrencyNever,
	}
}

// ConcurrencySafe reports false: an edit runs alone.
func (e *Edit) ConcurrencySafe(json.RawMessage) bool { return false }

// Validate runs every check of the edit, up to computing the new content.
func (e *Edit) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, _, _, err := e.prepare(env, input)
	return err
}

// prepare checks the edit and returns the file's new content.
func (e *Edit) prepare(env *tool.Env, input json.RawMessage) (editInput, current, string, error) {
	var in editInput
	if err := decode(input, &in); err != nil {
		return in, current{}, "", err
	}
	if in.OldString == in.NewString {
		return in, current{}, "", tool.Invalid(msgSameStrings)
	}
	cur, err := loadForWrite(env, in.FilePath)
	if err != nil {
		return in, cur, "", err
	}
	switch {
	case !cur.exists && in.OldString == "":
		return in, cur, in.NewString, nil
	case !cur.exists:
		return in, cur, "", tool.Invalid(fileNotFound(env))
	case in.OldString == "":
		// An empty old_string creates a file; an existing empty file may be
		// filled the same way.
		if strings.TrimSpace(cur.content) != "" {
			return in, cur, "", tool.Invalid(msgFileExists)
		}
		if err := checkFresh(env, cur); err != nil {
			return in, cur, "", err
		}
		return in, cur, in.NewString, nil
	}
	if err := checkFresh(env, cur); err != nil {
		return in, cur, "", err
	}
	updated, err := replace(cur.content, in.OldString, in.NewString, in.ReplaceAll)
	return in, cur, updated, err
}

// replace applies the edit to content. The model sees files with "\r\n"
// shown as "\n" (Read drops the "\r"), so in a file that uses "\r\n"
// throughout, the strings are matched against "\n" and the result is
// written back with "\r\n".
func replace(content, from, to string, all bool) (string, error) {
	crlf := strings.Contains(content, "\r\n") && strings.Count(content, "\n") == strings.Count(content, "\r\n")
	if crlf {
		content = strings.ReplaceAll(content, "\r\n", "\n")
		from = strings.ReplaceAll(from, "\r\n", "\n")
		to = strings.ReplaceAll(to, "\r\n", "\n")
	}
	switch n := strings.Count(content, from); {
	case n == 0:
		return "", tool.Invalid("String to replace not found in file.\nString: " + from)
	case n > 1 && !all:
		return "", tool.Invalid(fmt.Sprintf("Found %d matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: %s", n, from))
	}
	limit := 1
	if all {
		limit = -1
	}
	out := strings.Replace(content, from, to, limit)
	if crlf {
		out = strings.ReplaceAll(out, "\n", "\r\n")
	}
	return out, nil
}

// Run applies the edit.
func (e *Edit) Run(_ context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	in, cur, updated, err := e.prepare(env, call.Input)
	if err != nil {
		return failed(err)
	}
	remember(env, call, cur)
	if err := write(env, cur, updated); err != nil {
		return failed(err)
	}
	if in.ReplaceAll {
		return tool.Text("The file " + in.FilePath + " has been updated. All occurrences were successfully replaced." + msgUpToDate)
	}
	return tool.Text("The file " + in.FilePath + " has been updated successfully." + msgUpToDate)
}
