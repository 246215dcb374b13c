package execgrpc_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/internal/testpdf"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/settings"
)

// onePixelPNG is a valid 1x1 PNG.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// plotNotebook is an nbformat 4.5 notebook: a markdown cell and a code
// cell whose outputs are text and a PNG.
func plotNotebook(t *testing.T) string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{
		"cells": []any{
			map[string]any{"cell_type": "markdown", "id": "title", "metadata": map[string]any{}, "source": []string{"# Results"}},
			map[string]any{"cell_type": "code", "id": "plot", "execution_count": 2, "metadata": map[string]any{}, "source": []string{"show()"},
				"outputs": []any{
					map[string]any{"output_type": "stream", "name": "stdout", "text": []string{"plotted\n"}},
					map[string]any{"output_type": "display_data", "metadata": map[string]any{},
						"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(onePixelPNG), "text/plain": []string{"<Figure>"}}},
				}},
		},
		"metadata": map[string]any{"language_info": map[string]any{"name": "python"}},
		"nbformat": 4, "nbformat_minor": 5,
	}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func writeBytes(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
}

// notebookCells parses a notebook file, failing if it is not valid JSON.
func notebookCells(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []map[string]any `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatalf("the notebook is no longer valid JSON: %v\n%s", err, b)
	}
	return nb.Cells
}

func TestNotebookReadAndEditOverTheStream(t *testing.T) {
	h, root := realHarness(t)
	nb := filepath.Join(root, "results.ipynb")
	writeFile(t, nb, plotNotebook(t))
	s := h.open(nil)
	in := func(v map[string]any) string {
		v["notebook_path"] = nb
		b, _ := json.Marshal(v)
		return string(b)
	}

	s.useTool("e0", "m0", "NotebookEdit", in(map[string]any{"cell_id": "plot", "new_source": "x"}))
	if r := s.results(1)[0]; !r.GetIsError() || text(r) != useErrorText("File has not been read yet. Read it first before writing to it.") {
		t.Fatalf("edit before a read: %q", text(r))
	}

	// Read and edit in one message: the edit waits for the read.
	s.useTool("r1", "m1", "Read", `{"file_path":`+jsonString(nb)+`}`)
	s.useTool("e1", "m1", "NotebookEdit", in(map[string]any{"cell_id": "plot", "new_source": "show(dpi=200)"}))
	rs := s.results(2)
	read, edit := rs[0], rs[1]
	if read.GetToolUseId() != "r1" || read.IsError != nil || len(read.GetContent()) != 2 {
		t.Fatalf("read: %v", read)
	}
	wantText := "<cell id=\"title\"><cell_type>markdown</cell_type># Results</cell id=\"title\">\n<cell id=\"plot\">show()</cell id=\"plot\">\n\nplotted\n\n\n<Figure>"
	if got := read.GetContent()[0].GetText().GetText(); got != wantText {
		t.Errorf("read text:\n got %q\nwant %q", got, wantText)
	}
	img := read.GetContent()[1].GetImage()
	if img.GetMediaType() != "image/png" || img.GetDataBase64() != base64.StdEncoding.EncodeToString(onePixelPNG) {
		t.Errorf("read's second block is not the PNG output: %v", read.GetContent()[1])
	}
	if edit.IsError != nil || text(edit) != "Updated cell plot with show(dpi=200)" {
		t.Fatalf("edit: %q", text(edit))
	}

	s.useTool("e2", "m2", "NotebookEdit", in(map[string]any{"cell_id": "title", "new_source": "Made with toolwire.", "cell_type": "markdown", "edit_mode": "insert"}))
	inserted := s.results(1)[0]
	newID := strings.TrimSuffix(strings.TrimPrefix(text(inserted), "Inserted cell "), " with Made with toolwire.")
	if inserted.IsError != nil || len(newID) != 8 {
		t.Fatalf("insert: %q", text(inserted))
	}
	s.useTool("e3", "m3", "NotebookEdit", in(map[string]any{"cell_id": "title", "new_source": "", "edit_mode": "delete"}))
	if r := s.results(1)[0]; text(r) != "Deleted cell title" {
		t.Fatalf("delete: %q", text(r))
	}

	cells := notebookCells(t, nb)
	if len(cells) != 2 || cells[0]["id"] != newID || cells[1]["id"] != "plot" {
		t.Fatalf("cells: %v", cells)
	}
	if o := cells[1]["outputs"].([]any); len(o) != 0 || cells[1]["execution_count"] != nil {
		t.Errorf("the replaced code cell kept its outputs: %v", cells[1])
	}
	// The atomic rewrite keeps the file's owner.
	if fi, err := os.Stat(nb); err != nil || os.Geteuid() == 0 && fi.Sys().(*syscall.Stat_t).Uid != sandboxtest.NobodyUID {
		t.Errorf("notebook after the edits: %v, %v", fi, err)
	}
}

// NotebookEdit is an edit tool: acceptEdits runs it in the workspace
// without asking, as it does Edit.
func TestNotebookEditInAcceptEditsMode(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{})
	nb := filepath.Join(root, "n.ipynb")
	writeFile(t, nb, plotNotebook(t))
	s := h.openWith(settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeAcceptEdits}})
	s.useTool("r", "m1", "Read", `{"file_path":`+jsonString(nb)+`}`)
	s.resultWithoutAsking()
	s.useTool("e", "m2", "NotebookEdit", `{"notebook_path":`+jsonString(nb)+`,"cell_id":"title","new_source":"# Done"}`)
	wantResult(t, s.resultWithoutAsking(), outcomeOK, false, "Updated cell title with # Done", "mode:acceptEdits")
}

func TestPDFReadOverTheStream(t *testing.T) {
	h, root := realHarness(t)
	small, long := testpdf.Text(t, 2), testpdf.Text(t, 12)
	writeBytes(t, filepath.Join(root, "small.pdf"), small)
	writeBytes(t, filepath.Join(root, "long.pdf"), long)
	writeBytes(t, filepath.Join(root, "locked.pdf"), testpdf.Encrypt(t, small, "pw", "owner"))
	s := h.open(nil)
	for _, name := range []string{"small.pdf", "long.pdf", "locked.pdf"} {
		s.useTool("r"+name, "m", "Read", `{"file_path":`+jsonString(filepath.Join(root, name))+`}`)
	}
	s.useTool("rpages", "m", "Read", `{"file_path":`+jsonString(filepath.Join(root, "long.pdf"))+`,"pages":"11-12"}`)
	byID := map[string]*executorv1.Result{}
	for _, r := range s.results(4) {
		byID[r.GetToolUseId()] = r
	}

	doc := func(r *executorv1.Result) []byte {
		t.Helper()
		c := r.GetContent()
		if r.IsError != nil || len(c) != 2 || c[1].GetDocument() == nil || c[1].GetDocument().GetMediaType() != "application/pdf" {
			t.Fatalf("%s: not a document result: %v", r.GetToolUseId(), r)
		}
		b, err := base64.StdEncoding.DecodeString(c[1].GetDocument().GetDataBase64())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(doc(byID["rsmall.pdf"]), small) {
		t.Error("the whole small PDF did not arrive as it is")
	}
	pages := testpdf.Contents(t, doc(byID["rpages"]))
	if len(pages) != 2 || !strings.Contains(pages[0], testpdf.PageText(11)) || !strings.Contains(pages[1], testpdf.PageText(12)) {
		t.Errorf("pages 11-12: %q", pages)
	}
	if r := byID["rlong.pdf"]; !r.GetIsError() || !strings.HasPrefix(text(r), "This PDF has 12 pages, too many to read at once.") {
		t.Errorf("long PDF without pages: %v %q", r.GetIsError(), text(r))
	}
	if r := byID["rlocked.pdf"]; !r.GetIsError() || !strings.HasPrefix(text(r), "This PDF is password-protected") {
		t.Errorf("encrypted PDF: %v %q", r.GetIsError(), text(r))
	}
}
