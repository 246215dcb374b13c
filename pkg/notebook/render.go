package notebook

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Block is one block of a rendered notebook: text, or an image.
type Block struct {
	// Text is set for a text block.
	Text string
	// MediaType is set for an image: "image/png" or "image/jpeg".
	MediaType string
	// Data holds the image's bytes.
	Data []byte
}

// Limits bound what Render puts into the blocks.
type Limits struct {
	// CellOutputChars is the most output text one cell shows; a cell with
	// more shows how to get its outputs with jq instead. Claude Code's
	// threshold is 10 000.
	CellOutputChars int
	// ImageBytes is the largest image shown; a larger one is replaced by
	// a note.
	ImageBytes int
}

// output is one cell output as shown: its text, and an image.
type output struct {
	text      string
	mediaType string
	image     string // base64, whitespace removed
}

// Render returns the notebook the way Claude Code shows it to the model:
// each cell as <cell id="…">source</cell id="…"> (with <cell_type> for
// cells that are not code, <language> for code not in Python), then its
// outputs — text as text, PNG and JPEG images as image blocks. Adjacent
// text blocks are joined with a newline. path is the notebook's path, for
// the jq hint of cells with large outputs.
func (nb *Notebook) Render(path string, lim Limits) []Block {
	var blocks []Block
	add := func(b Block) {
		if b.MediaType == "" && len(blocks) > 0 && blocks[len(blocks)-1].MediaType == "" {
			blocks[len(blocks)-1].Text += "\n" + b.Text
			return
		}
		blocks = append(blocks, b)
	}
	for i := range nb.cells {
		add(Block{Text: nb.cellText(i)})
		for _, o := range nb.outputs(i, path, lim) {
			if o.text != "" {
				add(Block{Text: "\n" + o.text})
			}
			if o.image == "" {
				continue
			}
			data, err := base64.StdEncoding.DecodeString(o.image)
			switch {
			case err != nil:
				add(Block{Text: fmt.Sprintf("[%s output that is not valid base64: %v]", o.mediaType, err)})
			case len(data) > lim.ImageBytes:
				add(Block{Text: fmt.Sprintf("[%s output of %d bytes not shown: images over %d bytes are left out. Extract it with jq and Read the file if you need it.]", o.mediaType, len(data), lim.ImageBytes)})
			default:
				add(Block{MediaType: o.mediaType, Data: data})
			}
		}
	}
	return blocks
}

func (nb *Notebook) cellText(i int) string {
	id, typ := nb.CellID(i), nb.CellType(i)
	var b strings.Builder
	fmt.Fprintf(&b, `<cell id="%s">`, id)
	if typ != Code {
		fmt.Fprintf(&b, "<cell_type>%s</cell_type>", typ)
	} else if nb.Language != "python" {
		fmt.Fprintf(&b, "<language>%s</language>", nb.Language)
	}
	b.WriteString(nb.Source(i))
	fmt.Fprintf(&b, `</cell id="%s">`, id)
	return b.String()
}

// outputs returns the outputs of code cell i as shown: nothing for other
// cells; a jq hint instead of outputs whose text is over the limit.
func (nb *Notebook) outputs(i int, path string, lim Limits) []output {
	if nb.CellType(i) != Code {
		return nil
	}
	raw, ok := nb.cells[i].get("outputs")
	if !ok {
		return nil
	}
	var list []struct {
		OutputType string                     `json:"output_type"`
		Text       json.RawMessage            `json:"text"`
		Data       map[string]json.RawMessage `json:"data"`
		EName      string                     `json:"ename"`
		EValue     string                     `json:"evalue"`
		Traceback  []string                   `json:"traceback"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []output
	chars := 0
	for _, o := range list {
		var s output
		switch o.OutputType {
		case "stream":
			s.text = multiline(o.Text)
		case "execute_result", "display_data":
			s.text = multiline(o.Data["text/plain"])
			for _, mt := range []string{"image/png", "image/jpeg"} {
				if img := multiline(o.Data[mt]); img != "" {
					s.mediaType, s.image = mt, strings.Join(strings.Fields(img), "")
					break
				}
			}
		case "error":
			s.text = o.EName + ": " + o.EValue + "\n" + strings.Join(o.Traceback, "\n")
		default:
			continue
		}
		chars += len(s.text)
		out = append(out, s)
	}
	if chars > lim.CellOutputChars {
		return []output{{text: fmt.Sprintf("Outputs are too large to include. Use Bash with: cat %q | jq '.cells[%d].outputs'", path, i)}}
	}
	return out
}
