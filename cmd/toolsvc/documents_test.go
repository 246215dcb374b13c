package main_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/testpdf"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// redDot is a valid 1x1 PNG.
var redDot = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82")

// blocks returns the content list of a tool_result, failing the test when
// it is a plain string.
func blocks(t *testing.T, r toolResult) []map[string]any {
	t.Helper()
	list, ok := r.Content.([]any)
	if !ok {
		t.Fatalf("%s: content is not a list of blocks: %+v", r.ToolUseID, r.Content)
	}
	var out []map[string]any
	for _, b := range list {
		out = append(out, b.(map[string]any))
	}
	return out
}

// sourceData decodes the base64 source of an image or document block of
// type typ and media type mediaType.
func sourceData(t *testing.T, b map[string]any, typ, mediaType string) []byte {
	t.Helper()
	src, _ := b["source"].(map[string]any)
	if b["type"] != typ || src["type"] != "base64" || src["media_type"] != mediaType {
		t.Fatalf("block %v, want a base64 %s block of %s", b, typ, mediaType)
	}
	data, err := base64.StdEncoding.DecodeString(src["data"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCallNotebook(t *testing.T) {
	root := sandboxtest.Dir(t)
	nb, err := json.MarshalIndent(map[string]any{
		"cells": []any{
			map[string]any{"cell_type": "markdown", "id": "title", "metadata": map[string]any{}, "source": "# Dots"},
			map[string]any{"cell_type": "code", "id": "plot", "execution_count": 1, "metadata": map[string]any{}, "source": "dot()",
				"outputs": []any{map[string]any{"output_type": "execute_result", "execution_count": 1, "metadata": map[string]any{},
					"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(redDot), "text/plain": "<dot>"}}}},
		},
		"metadata": map[string]any{"language_info": map[string]any{"name": "python"}},
		"nbformat": 4, "nbformat_minor": 5,
	}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "dots.ipynb")
	if err := os.WriteFile(path, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	msg := `{"role":"assistant","content":[
		{"type":"tool_use","id":"early","name":"NotebookEdit","input":{"notebook_path":"dots.ipynb","cell_id":"plot","new_source":"x"}},
		{"type":"tool_use","id":"read","name":"Read","input":{"file_path":"dots.ipynb"}},
		{"type":"tool_use","id":"replace","name":"NotebookEdit","input":{"notebook_path":"dots.ipynb","cell_id":"plot","new_source":"dot(size=2)"}},
		{"type":"tool_use","id":"insert","name":"NotebookEdit","input":{"notebook_path":"dots.ipynb","cell_id":"plot","new_source":"Bigger.","cell_type":"markdown","edit_mode":"insert"}},
		{"type":"tool_use","id":"delete","name":"NotebookEdit","input":{"notebook_path":"dots.ipynb","cell_id":"title","new_source":"","edit_mode":"delete"}}
	]}`
	rs := runCall(t, msg, "--embedded", "--root", root)
	if len(rs) != 5 {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].Content != "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>" || rs[0].IsError == nil || !*rs[0].IsError {
		t.Errorf("edit before read: %+v", rs[0])
	}
	read := blocks(t, rs[1])
	if len(read) != 2 || read[0]["type"] != "text" || read[0]["text"] != "<cell id=\"title\"><cell_type>markdown</cell_type># Dots</cell id=\"title\">\n<cell id=\"plot\">dot()</cell id=\"plot\">\n\n<dot>" {
		t.Fatalf("read: %+v", read)
	}
	if img := sourceData(t, read[1], "image", "image/png"); !bytes.Equal(img, redDot) {
		t.Errorf("image output: %x", img)
	}
	if rs[2].Content != "Updated cell plot with dot(size=2)" || rs[4].Content != "Deleted cell title" {
		t.Errorf("replace %+v, delete %+v", rs[2], rs[4])
	}
	inserted, _ := rs[3].Content.(string)
	newID := strings.TrimSuffix(strings.TrimPrefix(inserted, "Inserted cell "), " with Bigger.")
	if len(newID) != 8 || rs[3].IsError != nil {
		t.Fatalf("insert: %+v", rs[3])
	}

	var after struct {
		Cells []struct {
			ID      string `json:"id"`
			Type    string `json:"cell_type"`
			Source  []string
			Outputs []any `json:"outputs"`
		} `json:"cells"`
		Metadata map[string]any `json:"metadata"`
	}
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &after); err != nil {
		t.Fatalf("the notebook is no longer valid JSON: %v\n%s", err, b)
	}
	if len(after.Cells) != 2 || after.Cells[0].ID != "plot" || strings.Join(after.Cells[0].Source, "") != "dot(size=2)" ||
		len(after.Cells[0].Outputs) != 0 || after.Cells[1].ID != newID || after.Cells[1].Type != "markdown" || after.Metadata["language_info"] == nil {
		t.Fatalf("notebook after the edits:\n%s", b)
	}
}

func TestCallPDF(t *testing.T) {
	root := sandboxtest.Dir(t)
	small, long := testpdf.Text(t, 2), testpdf.Text(t, 15)
	for name, data := range map[string][]byte{
		"small.pdf":  small,
		"long.pdf":   long,
		"locked.pdf": testpdf.Encrypt(t, small, "secret", "owner"),
	} {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := `{"type":"tool_use","id":"whole","name":"Read","input":{"file_path":"small.pdf"}}
{"type":"tool_use","id":"pages","name":"Read","input":{"file_path":"long.pdf","pages":"3-4"}}
{"type":"tool_use","id":"long","name":"Read","input":{"file_path":"long.pdf"}}
{"type":"tool_use","id":"locked","name":"Read","input":{"file_path":"locked.pdf"}}
`
	rs := runCall(t, in, "--embedded", "--root", root)
	if len(rs) != 4 {
		t.Fatalf("results %+v", rs)
	}
	whole := blocks(t, rs[0])
	head, _ := whole[0]["text"].(string)
	if len(whole) != 2 || !strings.HasPrefix(head, "PDF file read: "+filepath.Join(root, "small.pdf")+" (") || !strings.HasSuffix(head, "KB, 2 pages)") {
		t.Fatalf("whole: %+v", whole)
	}
	if doc := sourceData(t, whole[1], "document", "application/pdf"); !bytes.Equal(doc, small) {
		t.Error("the whole PDF was not sent as it is")
	}
	pages := blocks(t, rs[1])
	cut := testpdf.Contents(t, sourceData(t, pages[1], "document", "application/pdf"))
	if len(cut) != 2 || !strings.Contains(cut[0], testpdf.PageText(3)) || !strings.Contains(cut[1], testpdf.PageText(4)) {
		t.Errorf("pages 3-4: %q", cut)
	}
	for i, prefix := range map[int]string{2: "This PDF has 15 pages, too many to read at once.", 3: "This PDF is password-protected"} {
		if s, _ := rs[i].Content.(string); !strings.HasPrefix(s, prefix) || rs[i].IsError == nil || !*rs[i].IsError {
			t.Errorf("%s: %+v, want an error starting %q", rs[i].ToolUseID, rs[i], prefix)
		}
	}
}
