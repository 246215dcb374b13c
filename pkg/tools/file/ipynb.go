package file

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/notebook"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

const (
	// maxNotebookBytes is the largest .ipynb file Read parses; outputs
	// with images make notebooks much larger than their text.
	maxNotebookBytes = 64 << 20
	// cellOutputChars is Claude Code's threshold above which a cell's
	// outputs are replaced by a jq hint.
	cellOutputChars = 10000
)

// readNotebook returns a notebook's cells with their outputs: text
// blocks, and image blocks for PNG and JPEG outputs. The text is held to
// the caps of a text Read, the images together to maxDocumentBytes; a
// notebook over them gets jq commands that read it in parts. offset and
// limit do not apply, as in Claude Code. A file that is not an nbformat 4
// notebook is read as text.
func (r *Read) readNotebook(ctx context.Context, env *tool.Env, p workspace.Path, f *os.File, fi fs.FileInfo, in readInput) *tool.Result {
	if fi.Size() > maxNotebookBytes {
		return tool.Error(notebookTooLarge(p.Abs, fmt.Sprintf("Notebook file (%s) exceeds maximum allowed size (%s).", formatSize(fi.Size()), formatSize(maxNotebookBytes))))
	}
	data, err := workspace.ReadAll(f, fi.Size(), maxNotebookBytes)
	if err != nil {
		return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, err))
	}
	nb, err := notebook.Parse(data)
	if err != nil {
		if _, serr := f.Seek(0, io.SeekStart); serr != nil {
			return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, serr))
		}
		res := r.readText(ctx, env, p, f, nil, fi, in)
		if !res.IsError && len(res.Content) > 0 {
			res.Content[0].Text = fmt.Sprintf("<system-reminder>This .ipynb file is not a notebook NotebookEdit can change (%v); it is shown as plain text.</system-reminder>\n", err) + res.Content[0].Text
		}
		return res
	}

	blocks := nb.Render(p.Abs, notebook.Limits{CellOutputChars: cellOutputChars, ImageBytes: maxImageBytes})
	var textBytes, runes, imageBytes int
	for _, b := range blocks {
		textBytes += len(b.Text)
		runes += utf8.RuneCountInString(b.Text)
		imageBytes += len(b.Data)
	}
	maxBytes := env.Limits.WithDefaults().MaxReadBytes
	maxTokens := orDefault(r.MaxTokens, DefaultMaxTokens)
	switch tokens := (runes + 3) / 4; {
	case int64(textBytes) > maxBytes:
		return tool.Error(notebookTooLarge(p.Abs, fmt.Sprintf("Notebook content (%s) exceeds maximum allowed size (%s).", formatSize(int64(textBytes)), formatSize(maxBytes))))
	case tokens > maxTokens:
		return tool.Error(notebookTooLarge(p.Abs, fmt.Sprintf("Notebook content (%d tokens) exceeds maximum allowed tokens (%d).", tokens, maxTokens)))
	case imageBytes > maxDocumentBytes:
		return tool.Error(notebookTooLarge(p.Abs, fmt.Sprintf("The images in the notebook's outputs (%s) exceed the maximum allowed size (%s).", formatSize(int64(imageBytes)), formatSize(maxDocumentBytes))))
	}

	record := tool.FileRead{ModTime: fi.ModTime(), Offset: 1}
	if len(data) <= maxTrackedBytes {
		record.Content = string(data)
	}
	env.Reads.Set(p.Abs, record)
	if len(blocks) == 0 {
		return tool.Text("<system-reminder>Warning: the notebook exists but has no cells.</system-reminder>")
	}
	content := make([]tool.Content, 0, len(blocks))
	for _, b := range blocks {
		c := tool.Content{Text: b.Text, MediaType: b.MediaType, Data: b.Data}
		// The API rejects an image whose declared type differs from its bytes.
		if sniffed := sniffImage(b.Data); c.MediaType != "" && sniffed != "" {
			c.MediaType = sniffed
		}
		content = append(content, c)
	}
	return &tool.Result{Content: content}
}

// notebookTooLarge says why a notebook is not shown and how to read it in
// parts.
func notebookTooLarge(path, why string) string {
	q := fmt.Sprintf("%q", path)
	return why + " Use Bash with jq to read specific portions:\n" +
		"  cat " + q + " | jq '.cells[:20]' # First 20 cells\n" +
		"  cat " + q + " | jq '.cells[100:120]' # Cells 100-120\n" +
		"  cat " + q + " | jq '.cells | length' # Count total cells\n" +
		"  cat " + q + " | jq '.cells[] | select(.cell_type==\"code\") | .source' # All code sources"
}
