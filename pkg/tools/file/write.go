package file

import (
	"context"
	"encoding/json"

	"github.com/toolwire/toolwire/pkg/tool"
)

// Write is the Write tool: create a file or replace its whole content.
type Write struct{}

var _ tool.Tool = (*Write)(nil)

type writeInput struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

// Spec describes Write.
func (w *Write) Spec() tool.Spec {
	return tool.Spec{
		Name:        "Write",
		Description: writeDescription,
		InputSchema: json.RawMessage(writeSchema),
		Concurrency: tool.ConcurrencyNever,
	}
}

// ConcurrencySafe reports false: a write runs alone.
func (w *Write) ConcurrencySafe(json.RawMessage) bool { return false }

// Validate checks the path and, for an existing file, that it was read and
// has not changed since.
func (w *Write) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, _, err := w.prepare(env, input)
	return err
}

func (w *Write) prepare(env *tool.Env, input json.RawMessage) (writeInput, current, error) {
	var in writeInput
	if err := decode(input, &in); err != nil {
		return in, current{}, err
	}
	cur, err := loadForWrite(env, in.FilePath)
	if err == nil {
		err = checkFresh(env, cur)
	}
	return in, cur, err
}

// Run writes the file, creating missing parent directories.
func (w *Write) Run(_ context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	in, cur, err := w.prepare(env, call.Input)
	if err != nil {
		return failed(err)
	}
	remember(env, call, cur)
	if err := write(env, cur, in.Content); err != nil {
		return failed(err)
	}
	if !cur.exists {
		return tool.Text("File created successfully at: " + in.FilePath + msgUpToDate)
	}
	return tool.Text("The file " + in.FilePath + " has been updated successfully." + msgUpToDate)
}
