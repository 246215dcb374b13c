package file

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolwire/toolwire/pkg/notebook"
	"github.com/toolwire/toolwire/pkg/tool"
)

// NotebookEdit is the NotebookEdit tool: replace, insert or delete one
// cell of a Jupyter notebook. Like Edit it needs a Read of the notebook
// first and refuses one changed on disk since; the file is rewritten
// atomically, everything but the edited cell kept as it was.
type NotebookEdit struct{}

var _ tool.Tool = (*NotebookEdit)(nil)

type notebookEditInput struct {
	NotebookPath string `json:"notebook_path"`
	CellID       string `json:"cell_id"`
	NewSource    string `json:"new_source"`
	CellType     string `json:"cell_type"`
	EditMode     string `json:"edit_mode"`
}

// Edit modes.
const (
	modeReplace = "replace"
	modeInsert  = "insert"
	modeDelete  = "delete"
)

// Spec describes NotebookEdit.
func (e *NotebookEdit) Spec() tool.Spec {
	return tool.Spec{
		Name:        "NotebookEdit",
		Description: notebookEditDescription,
		InputSchema: json.RawMessage(notebookEditSchema),
		Concurrency: tool.ConcurrencyNever,
	}
}

// ConcurrencySafe reports false: an edit runs alone.
func (e *NotebookEdit) ConcurrencySafe(json.RawMessage) bool { return false }

// Validate runs every check of the edit, up to the edited notebook.
func (e *NotebookEdit) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, _, _, err := e.prepare(env, input)
	return err
}

// edited is a notebook with the edit applied, and what the result says.
type edited struct {
	nb     *notebook.Notebook
	cellID string // the cell's name after the edit
}

func (e *NotebookEdit) prepare(env *tool.Env, input json.RawMessage) (notebookEditInput, current, edited, error) {
	var in notebookEditInput
	if err := decode(input, &in); err != nil {
		return in, current{}, edited{}, err
	}
	if in.EditMode == "" {
		in.EditMode = modeReplace
	}
	switch {
	case extension(in.NotebookPath) != "ipynb":
		return in, current{}, edited{}, tool.Invalid("File must be a Jupyter notebook (.ipynb file). For editing other file types, use the Edit tool.")
	case in.EditMode == modeInsert && in.CellType == "":
		return in, current{}, edited{}, tool.Invalid("Cell type is required when using edit_mode=insert.")
	case in.CellID == "" && in.EditMode != modeInsert:
		return in, current{}, edited{}, tool.Invalid("Cell ID must be specified when not inserting a new cell.")
	}
	cur, err := loadForWrite(env, in.NotebookPath)
	if err != nil {
		return in, cur, edited{}, err
	}
	if !cur.exists {
		return in, cur, edited{}, tool.Invalid("Notebook file does not exist.")
	}
	if err := checkFresh(env, cur); err != nil {
		return in, cur, edited{}, err
	}
	nb, err := notebook.Parse([]byte(cur.content))
	if err != nil {
		return in, cur, edited{}, tool.Invalid(fmt.Sprintf("The notebook cannot be edited: %v. Change it with Edit or Write instead.", err))
	}

	// The cell named, if any; -1 inserts at the start.
	at := -1
	if in.CellID != "" {
		if at, err = nb.Find(in.CellID); err != nil {
			return in, cur, edited{}, tool.Invalid(err.Error())
		}
	}
	out := edited{nb: nb}
	switch in.EditMode {
	case modeReplace:
		out.cellID = nb.CellID(at)
		nb.Replace(at, in.NewSource, in.CellType)
	case modeInsert:
		out.cellID = nb.Insert(at+1, in.NewSource, in.CellType)
	case modeDelete:
		out.cellID = nb.CellID(at)
		nb.Delete(at)
	}
	return in, cur, out, nil
}

// Run applies the edit and writes the notebook.
func (e *NotebookEdit) Run(_ context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	in, cur, ed, err := e.prepare(env, call.Input)
	if err != nil {
		return failed(err)
	}
	data, err := ed.nb.Marshal()
	if err != nil {
		return tool.Error(fmt.Sprintf("Could not encode the notebook: %v", err))
	}
	remember(env, call, cur)
	if err := write(env, cur, string(data)); err != nil {
		return failed(err)
	}
	switch in.EditMode {
	case modeInsert:
		return tool.Text("Inserted cell " + ed.cellID + " with " + in.NewSource)
	case modeDelete:
		return tool.Text("Deleted cell " + ed.cellID)
	default:
		return tool.Text("Updated cell " + ed.cellID + " with " + in.NewSource)
	}
}
