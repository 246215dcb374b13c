package file

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/tool"
)

// testNotebook is an nbformat 4.5 notebook with a markdown cell and a code
// cell whose outputs are text and a PNG.
func testNotebook(t *testing.T) string {
	t.Helper()
	nb := map[string]any{
		"cells": []any{
			map[string]any{"cell_type": "markdown", "id": "intro", "metadata": map[string]any{"tags": []string{"keep"}}, "source": []string{"# Plot\n", "A <b>plot</b>."}},
			map[string]any{"cell_type": "code", "id": "plot", "execution_count": 7, "metadata": map[string]any{},
				"source": []string{"plt.plot([1, 2])"},
				"outputs": []any{
					map[string]any{"output_type": "stream", "name": "stdout", "text": []string{"drawing\n"}},
					map[string]any{"output_type": "display_data", "metadata": map[string]any{},
						"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(tinyPNG) + "\n", "text/plain": []string{"<Figure>"}}},
				}},
		},
		"metadata":       map[string]any{"kernelspec": map[string]any{"name": "python3"}, "language_info": map[string]any{"name": "python"}},
		"nbformat":       4,
		"nbformat_minor": 5,
	}
	b, err := json.MarshalIndent(nb, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// cells parses a notebook file into its cells, failing the test if it is
// not valid JSON.
func cells(t *testing.T, name string) []map[string]any {
	t.Helper()
	var nb struct {
		Cells    []map[string]any `json:"cells"`
		Metadata map[string]any   `json:"metadata"`
		Major    int              `json:"nbformat"`
	}
	if err := json.Unmarshal([]byte(readFile(t, name)), &nb); err != nil {
		t.Fatalf("%s is no longer valid JSON: %v", name, err)
	}
	if nb.Major != 4 || nb.Metadata["kernelspec"] == nil {
		t.Fatalf("%s lost its format or metadata", name)
	}
	return nb.Cells
}

func source(c map[string]any) string {
	var s strings.Builder
	for _, l := range c["source"].([]any) {
		s.WriteString(l.(string))
	}
	return s.String()
}

func TestReadNotebook(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/n.ipynb", testNotebook(t))
	r := call(t, &Read{}, env, `{"file_path":"n.ipynb","offset":5,"limit":1}`)
	if r.IsError || len(r.Content) != 2 {
		t.Fatalf("%+v", r)
	}
	wantText := "<cell id=\"intro\"><cell_type>markdown</cell_type># Plot\nA <b>plot</b>.</cell id=\"intro\">\n" +
		"<cell id=\"plot\">plt.plot([1, 2])</cell id=\"plot\">\n\ndrawing\n\n\n<Figure>"
	if r.Content[0].Text != wantText {
		t.Errorf("text:\n got %q\nwant %q", r.Content[0].Text, wantText)
	}
	if img := r.Content[1]; !img.IsImage() || img.MediaType != "image/png" || string(img.Data) != string(tinyPNG) {
		t.Errorf("second block is not the PNG output: %+v", img)
	}
	if rec, ok := env.Reads.Get(dir + "/n.ipynb"); !ok || rec.Content != testNotebook(t) {
		t.Error("the read was not recorded with the notebook's content")
	}

	t.Run("too large", func(t *testing.T) {
		env, dir := newEnv(t)
		env.Limits.MaxReadBytes = 100
		writeFile(t, dir+"/n.ipynb", testNotebook(t))
		r := call(t, &Read{}, env, `{"file_path":"n.ipynb"}`)
		if !r.IsError || !strings.HasPrefix(r.TextContent(), "Notebook content (") ||
			!strings.Contains(r.TextContent(), "exceeds maximum allowed size (100 bytes). Use Bash with jq to read specific portions:\n  cat \""+dir+"/n.ipynb\" | jq '.cells[:20]' # First 20 cells\n") {
			t.Fatalf("%q", r.TextContent())
		}
	})
	t.Run("no cells", func(t *testing.T) {
		writeFile(t, dir+"/empty.ipynb", `{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}`)
		check(t, call(t, &Read{}, env, `{"file_path":"empty.ipynb"}`), want{text: "<system-reminder>Warning: the notebook exists but has no cells.</system-reminder>"})
	})
	t.Run("not a notebook: read as text", func(t *testing.T) {
		writeFile(t, dir+"/broken.ipynb", "{\n \"cells\": [\n<<<<<<< HEAD\n")
		r := call(t, &Read{}, env, `{"file_path":"broken.ipynb"}`)
		if r.IsError || !strings.HasPrefix(r.TextContent(), "<system-reminder>This .ipynb file is not a notebook NotebookEdit can change (") ||
			!strings.HasSuffix(r.TextContent(), "</system-reminder>\n1\t{\n2\t \"cells\": [\n3\t<<<<<<< HEAD\n4\t") {
			t.Fatalf("%q", r.TextContent())
		}
	})
}

func TestNotebookEdit(t *testing.T) {
	const updated = "Updated cell "
	env, dir := newEnv(t)
	name := dir + "/n.ipynb"
	writeFile(t, name, testNotebook(t))
	edit := func(input string) *tool.Result { return call(t, &NotebookEdit{}, env, input) }

	// Never read: refused, untouched.
	check(t, edit(`{"notebook_path":"n.ipynb","cell_id":"plot","new_source":"x = 1"}`), notRead)
	if readFile(t, name) != testNotebook(t) {
		t.Fatal("a refused edit changed the file")
	}
	call(t, &Read{}, env, `{"file_path":"n.ipynb"}`)

	// Replace a code cell: its outputs and count go; the rest stays.
	check(t, edit(`{"notebook_path":"n.ipynb","cell_id":"plot","new_source":"plt.plot([3])\nplt.show()"}`),
		want{text: updated + "plot with plt.plot([3])\nplt.show()"})
	cs := cells(t, name)
	if len(cs) != 2 || source(cs[1]) != "plt.plot([3])\nplt.show()" || len(cs[1]["outputs"].([]any)) != 0 || cs[1]["execution_count"] != nil {
		t.Fatalf("replaced cell: %v", cs[1])
	}
	if source(cs[0]) != "# Plot\nA <b>plot</b>." || cs[0]["metadata"].(map[string]any)["tags"] == nil {
		t.Fatalf("other cell changed: %v", cs[0])
	}

	// The edit was recorded: the next needs no Read. Insert after intro,
	// then at the start.
	r := edit(`{"notebook_path":"n.ipynb","cell_id":"intro","new_source":"import numpy","cell_type":"code","edit_mode":"insert"}`)
	newID := strings.TrimSuffix(strings.TrimPrefix(r.TextContent(), "Inserted cell "), " with import numpy")
	if r.IsError || len(newID) != 8 {
		t.Fatalf("insert: %q", r.TextContent())
	}
	r = edit(`{"notebook_path":"n.ipynb","new_source":"# Top","cell_type":"markdown","edit_mode":"insert"}`)
	topID := strings.TrimSuffix(strings.TrimPrefix(r.TextContent(), "Inserted cell "), " with # Top")
	cs = cells(t, name)
	var order []string
	for _, c := range cs {
		order = append(order, c["id"].(string)+"="+c["cell_type"].(string))
	}
	if strings.Join(order, " ") != topID+"=markdown intro=markdown "+newID+"=code plot=code" {
		t.Fatalf("cells after inserts: %v", order)
	}
	if _, ok := cs[0]["outputs"]; ok {
		t.Error("a new markdown cell has outputs")
	}
	if o, ok := cs[2]["outputs"].([]any); !ok || len(o) != 0 {
		t.Error("a new code cell lacks its empty outputs")
	}

	// Change a cell's type, then delete one, by its cell-N name.
	check(t, edit(`{"notebook_path":"n.ipynb","cell_id":"plot","new_source":"Just text now.","cell_type":"markdown"}`),
		want{text: updated + "plot with Just text now."})
	if c := cells(t, name)[3]; c["cell_type"] != "markdown" || c["outputs"] != nil || c["execution_count"] != nil {
		t.Fatalf("type change: %v", c)
	}
	check(t, edit(`{"notebook_path":"n.ipynb","cell_id":"cell-1","new_source":"","edit_mode":"delete"}`),
		want{text: "Deleted cell intro"})
	if cs := cells(t, name); len(cs) != 3 || cs[1]["id"] != newID {
		t.Fatalf("after delete: %v", cs)
	}

	// Changed on disk since: refused.
	f, _ := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\n")
	f.Close()
	bumpMtime(t, name)
	check(t, edit(`{"notebook_path":"n.ipynb","cell_id":"plot","new_source":"y"}`), modified)
}

func TestNotebookEditRefusals(t *testing.T) {
	env, dir := newEnv(t)
	writeFile(t, dir+"/n.ipynb", testNotebook(t))
	writeFile(t, dir+"/bad.ipynb", "not json")
	writeFile(t, dir+"/a.txt", "a")
	call(t, &Read{}, env, `{"file_path":"n.ipynb"}`)
	call(t, &Read{}, env, `{"file_path":"bad.ipynb"}`)
	for _, tt := range []struct{ input, text string }{
		{`{"notebook_path":"a.txt","cell_id":"x","new_source":""}`, "File must be a Jupyter notebook (.ipynb file). For editing other file types, use the Edit tool."},
		{`{"notebook_path":"missing.ipynb","cell_id":"x","new_source":""}`, "Notebook file does not exist."},
		{`{"notebook_path":"n.ipynb","new_source":"x","edit_mode":"insert"}`, "Cell type is required when using edit_mode=insert."},
		{`{"notebook_path":"n.ipynb","new_source":"x"}`, "Cell ID must be specified when not inserting a new cell."},
		{`{"notebook_path":"n.ipynb","cell_id":"nope","new_source":"x"}`, `Cell with ID "nope" not found in notebook.`},
		{`{"notebook_path":"n.ipynb","cell_id":"cell-2","new_source":"x","edit_mode":"delete"}`, "Cell with index 2 does not exist in notebook."},
		{`{"notebook_path":"bad.ipynb","cell_id":"cell-0","new_source":"x"}`, "The notebook cannot be edited: not an nbformat 4 notebook: invalid character 'o' in literal null (expecting 'u'). Change it with Edit or Write instead."},
		{`{"notebook_path":"../n.ipynb","cell_id":"x","new_source":""}`, ""},
	} {
		r := call(t, &NotebookEdit{}, env, tt.input)
		if tt.text == "" {
			if r.FinalOutcome() != tool.OutcomeSandboxDenied {
				t.Errorf("%s: %v %q, want a sandbox denial", tt.input, r.FinalOutcome(), r.TextContent())
			}
			continue
		}
		check(t, r, want{text: wrapped(tt.text), isError: true, outcome: tool.OutcomeInvalidInput})
	}
	if readFile(t, dir+"/n.ipynb") != testNotebook(t) {
		t.Fatal("a refused edit changed the notebook")
	}
}

func TestNotebookEditWithoutIDs(t *testing.T) {
	env, dir := newEnv(t)
	name := dir + "/old.ipynb"
	writeFile(t, name, `{"cells":[{"cell_type":"code","execution_count":1,"metadata":{},"outputs":[{"output_type":"stream","name":"stdout","text":"1\n"}],"source":"a = 1"}],"metadata":{"kernelspec":{}},"nbformat":4,"nbformat_minor":4}`)
	if r := call(t, &Read{}, env, `{"file_path":"old.ipynb"}`); r.TextContent() != "<cell id=\"cell-0\">a = 1</cell id=\"cell-0\">\n\n1\n" {
		t.Fatalf("read: %q", r.TextContent())
	}
	check(t, call(t, &NotebookEdit{}, env, `{"notebook_path":"old.ipynb","cell_id":"cell-0","new_source":"b = 2","cell_type":"code","edit_mode":"insert"}`),
		want{text: "Inserted cell cell-1 with b = 2"})
	check(t, call(t, &NotebookEdit{}, env, `{"notebook_path":"old.ipynb","cell_id":"cell-0","new_source":"a = 3"}`),
		want{text: "Updated cell cell-0 with a = 3"})
	cs := cells(t, name)
	if len(cs) != 2 || source(cs[0]) != "a = 3" || source(cs[1]) != "b = 2" || cs[1]["id"] != nil {
		t.Fatalf("cells: %v", cs)
	}
}
