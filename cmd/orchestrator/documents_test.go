package main_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/testpdf"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// pixel is a valid 1x1 PNG.
var pixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82")

// rawToolResult finds the tool_result of id in the raw JSON of a request,
// as the API receives it.
func rawToolResult(t *testing.T, r *fakeapi.Request, id string) map[string]any {
	t.Helper()
	for _, m := range r.JSON["messages"].([]any) {
		content, _ := m.(map[string]any)["content"].([]any)
		for _, b := range content {
			if b := b.(map[string]any); b["type"] == "tool_result" && b["tool_use_id"] == id {
				return b
			}
		}
	}
	t.Fatalf("request %d has no tool_result for %s:\n%s", r.Index, id, r.Raw)
	return nil
}

// `orchestrator -p` reads a PDF page range and a notebook with an image
// output, and edits the notebook: the document and image blocks reach the
// Messages API inside the tool_results, and the edit lands in the file.
func TestHeadlessPDFAndNotebook(t *testing.T) {
	root := sandboxtest.Dir(t)
	pdfPath, nbPath := filepath.Join(root, "report.pdf"), filepath.Join(root, "analysis.ipynb")
	if err := os.WriteFile(pdfPath, testpdf.Text(t, 14), 0o644); err != nil {
		t.Fatal(err)
	}
	nb, _ := json.Marshal(map[string]any{
		"cells": []any{map[string]any{"cell_type": "code", "id": "fig", "execution_count": 1, "metadata": map[string]any{}, "source": "plot()",
			"outputs": []any{map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(pixel)}}}}},
		"metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5,
	})
	if err := os.WriteFile(nbPath, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_pdf", "Read", map[string]any{"file_path": pdfPath, "pages": "13-14"}),
			fakeapi.ToolUse("toolu_nb", "Read", map[string]any{"file_path": nbPath}),
		),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_edit", "NotebookEdit", map[string]any{"notebook_path": nbPath, "cell_id": "fig", "new_source": "plot(color='red')"})),
		fakeapi.EndTurn(fakeapi.Text("Done.")),
	)
	r := runCLI(t, fake, "-p", "summarise the report's end and fix the plot", "--root", root,
		"--sessions-dir", t.TempDir(), "--permission-mode", "acceptEdits")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var offered []string
	for _, tl := range reqs[0].Body.Tools {
		offered = append(offered, tl.Name)
	}
	if !slices.Contains(offered, "NotebookEdit") {
		t.Errorf("NotebookEdit not offered: %v", offered)
	}

	// The PDF: a text block, then the document, on the wire.
	pdf := rawToolResult(t, reqs[1], "toolu_pdf")
	content, _ := pdf["content"].([]any)
	if len(content) != 2 || pdf["is_error"] != nil {
		t.Fatalf("PDF tool_result: %v", pdf)
	}
	if text := content[0].(map[string]any)["text"]; text != "PDF file read: "+pdfPath+" (pages 13-14 of 14)" {
		t.Errorf("PDF text block: %v", text)
	}
	doc := content[1].(map[string]any)
	src, _ := doc["source"].(map[string]any)
	if doc["type"] != "document" || src["type"] != "base64" || src["media_type"] != "application/pdf" {
		t.Fatalf("PDF block sent to the API: %v", doc)
	}
	data, err := base64.StdEncoding.DecodeString(src["data"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if pages := testpdf.Contents(t, data); len(pages) != 2 || !strings.Contains(pages[0], testpdf.PageText(13)) || !strings.Contains(pages[1], testpdf.PageText(14)) {
		t.Errorf("the document sent holds %q, want pages 13 and 14", pages)
	}

	// The fake API decodes it as a document block too.
	var pdfResult, nbResult model.Block
	for _, b := range reqs[1].Body.Messages[len(reqs[1].Body.Messages)-1].Content {
		switch b.ToolUseID {
		case "toolu_pdf":
			pdfResult = b
		case "toolu_nb":
			nbResult = b
		}
	}
	if len(pdfResult.Content) != 2 || pdfResult.Content[1].Type != model.BlockDocument || pdfResult.Content[1].Source.Data != src["data"] {
		t.Errorf("PDF tool_result as the fake decoded it: %+v", pdfResult)
	}

	// The notebook: the cell as text, its output as an image.
	if len(nbResult.Content) != 2 || nbResult.Content[0].Text != "<cell id=\"fig\">plot()</cell id=\"fig\">" ||
		nbResult.Content[1].Type != model.BlockImage || nbResult.Content[1].Source.Data != base64.StdEncoding.EncodeToString(pixel) {
		t.Errorf("notebook tool_result: %+v", nbResult)
	}

	edit := rawToolResult(t, reqs[2], "toolu_edit")
	if edit["content"] != "Updated cell fig with plot(color='red')" || edit["is_error"] != nil {
		t.Errorf("NotebookEdit result: %v", edit)
	}
	var after struct {
		Cells []struct {
			Source  []string `json:"source"`
			Outputs []any    `json:"outputs"`
		} `json:"cells"`
	}
	b, _ := os.ReadFile(nbPath)
	if err := json.Unmarshal(b, &after); err != nil || len(after.Cells) != 1 || strings.Join(after.Cells[0].Source, "") != "plot(color='red')" || len(after.Cells[0].Outputs) != 0 {
		t.Fatalf("notebook after the edit (%v):\n%s", err, b)
	}
}
