// Package notebook reads and edits Jupyter notebooks (nbformat 4, .ipynb)
// for the file tools: it renders a notebook's cells and outputs the way
// Claude Code shows them to the model, and replaces, inserts and deletes
// cells while keeping everything else of the file as it was — metadata,
// ids, the other cells' outputs, unknown fields, key order and indentation.
//
// It does not run cells and does not touch the file system.
//
// Why one package of this size (about 550 lines): rendering and editing
// share the order-keeping JSON object that lets an edit leave the rest of
// the file byte for byte as it was.
package notebook

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Cell types.
const (
	Code     = "code"
	Markdown = "markdown"
)

// Notebook is a parsed .ipynb file.
type Notebook struct {
	doc   *object   // the top-level object, its "cells" kept apart in cells
	cells []*object // the cells, in order

	// Major and Minor are the nbformat version, e.g. 4 and 5.
	Major, Minor int
	// Language is the kernel's language (metadata.language_info.name),
	// "python" when the notebook does not say.
	Language string

	indent   string // indentation of the file, one level
	trailing bool   // the file ends with a newline
}

// ErrFormat wraps the reasons a file is not a notebook this package edits.
var ErrFormat = errors.New("not an nbformat 4 notebook")

// Parse reads a notebook. It fails, wrapping ErrFormat, on anything but
// a JSON object with nbformat 4 and a list of cells.
func Parse(data []byte) (*Notebook, error) {
	doc := newObject()
	if err := json.Unmarshal(data, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	nb := &Notebook{doc: doc, Language: "python", indent: detectIndent(data), trailing: bytes.HasSuffix(data, []byte("\n"))}
	if raw, ok := doc.get("nbformat"); !ok || json.Unmarshal(raw, &nb.Major) != nil {
		return nil, fmt.Errorf("%w: it has no nbformat version", ErrFormat)
	}
	if nb.Major != 4 {
		return nil, fmt.Errorf("%w: it is nbformat %d", ErrFormat, nb.Major)
	}
	if raw, ok := doc.get("nbformat_minor"); ok {
		_ = json.Unmarshal(raw, &nb.Minor)
	}
	raw, ok := doc.get("cells")
	if !ok {
		return nil, fmt.Errorf("%w: it has no cells", ErrFormat)
	}
	if err := json.Unmarshal(raw, &nb.cells); err != nil {
		return nil, fmt.Errorf("%w: its cells are not a list of objects: %v", ErrFormat, err)
	}
	for i, c := range nb.cells {
		if c == nil {
			return nil, fmt.Errorf("%w: cell %d is null", ErrFormat, i)
		}
	}
	if raw, ok := doc.get("metadata"); ok {
		var meta struct {
			LanguageInfo struct {
				Name string `json:"name"`
			} `json:"language_info"`
		}
		if json.Unmarshal(raw, &meta) == nil && meta.LanguageInfo.Name != "" {
			nb.Language = meta.LanguageInfo.Name
		}
	}
	return nb, nil
}

// detectIndent returns the indentation of the second line of a JSON file,
// where its first key sits; one space (Jupyter's) when there is none.
func detectIndent(data []byte) string {
	_, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return " "
	}
	n := 0
	for n < len(rest) && (rest[n] == ' ' || rest[n] == '\t') {
		n++
	}
	if n == 0 {
		return " "
	}
	return string(rest[:n])
}

// Marshal returns the notebook as a file: the original's key order and
// indentation, the cells as they are now.
func (nb *Notebook) Marshal() ([]byte, error) {
	// Not json.Marshal: it would escape <, > and & in the cells.
	cells := []byte{'['}
	for i, c := range nb.cells {
		if i > 0 {
			cells = append(cells, ',')
		}
		b, err := c.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("cell %d: %w", i, err)
		}
		cells = append(cells, b...)
	}
	nb.doc.set("cells", append(cells, ']'))
	compact, err := nb.doc.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", nb.indent); err != nil {
		return nil, err
	}
	if nb.trailing {
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// Len returns the number of cells.
func (nb *Notebook) Len() int { return len(nb.cells) }

// HasIDs reports whether the format version gives cells ids (4.5 and
// later).
func (nb *Notebook) HasIDs() bool { return nb.Major > 4 || nb.Major == 4 && nb.Minor >= 5 }

// CellID returns how the model names cell i: its id, or "cell-i" for a
// cell without one.
func (nb *Notebook) CellID(i int) string {
	if id, ok := nb.cells[i].str("id"); ok && id != "" {
		return id
	}
	return "cell-" + strconv.Itoa(i)
}

// CellType returns the cell_type of cell i.
func (nb *Notebook) CellType(i int) string {
	t, _ := nb.cells[i].str("cell_type")
	return t
}

// Source returns the source of cell i as one string.
func (nb *Notebook) Source(i int) string {
	raw, _ := nb.cells[i].get("source")
	return multiline(raw)
}

var indexRef = regexp.MustCompile(`^cell-(\d+)$`)

// NotFoundError is a cell reference that names no cell.
type NotFoundError struct {
	Ref   string
	Index int // the index of a "cell-N" reference; -1 for an id
}

// Error says which reference failed, in Claude Code's words.
func (e *NotFoundError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("Cell with index %d does not exist in notebook.", e.Index)
	}
	return fmt.Sprintf("Cell with ID %q not found in notebook.", e.Ref)
}

// Find returns the index of the cell ref names: the cell whose id is ref,
// else, for "cell-N", the cell at index N (cells of notebooks before 4.5
// have no ids and are named so).
func (nb *Notebook) Find(ref string) (int, error) {
	for i, c := range nb.cells {
		if id, ok := c.str("id"); ok && id == ref {
			return i, nil
		}
	}
	if m := indexRef.FindStringSubmatch(ref); m != nil {
		n, err := strconv.Atoi(m[1])
		if err == nil && n < len(nb.cells) {
			return n, nil
		}
		if err != nil {
			n = len(nb.cells)
		}
		return 0, &NotFoundError{Ref: ref, Index: n}
	}
	return 0, &NotFoundError{Ref: ref, Index: -1}
}

// Replace sets the source of cell i and, when cellType is not empty, its
// type. A code cell's outputs and execution count are cleared: they belong
// to the old source.
func (nb *Notebook) Replace(i int, source, cellType string) {
	c := nb.cells[i]
	if cellType != "" && cellType != nb.CellType(i) {
		c.setValue("cell_type", cellType)
		if cellType != Code {
			c.remove("outputs")
			c.remove("execution_count")
		}
		if cellType != Markdown {
			c.remove("attachments")
		}
	}
	c.setValue("source", lines(source))
	if nb.CellType(i) == Code {
		c.setValue("execution_count", nil)
		c.setValue("outputs", []any{})
	}
}

// Insert adds a cell of cellType at index i (0: first) and returns the
// name the model knows it by: a fresh id from nbformat 4.5 on, else its
// "cell-i".
func (nb *Notebook) Insert(i int, source, cellType string) string {
	c := newObject()
	// Keys in the order Jupyter writes them (sorted).
	c.setValue("cell_type", cellType)
	if cellType == Code {
		c.setValue("execution_count", nil)
	}
	id := ""
	if nb.HasIDs() {
		id = nb.newID()
		c.setValue("id", id)
	}
	c.setValue("metadata", map[string]any{})
	if cellType == Code {
		c.setValue("outputs", []any{})
	}
	c.setValue("source", lines(source))
	nb.cells = append(nb.cells[:i], append([]*object{c}, nb.cells[i:]...)...)
	if id == "" {
		id = "cell-" + strconv.Itoa(i)
	}
	return id
}

// Delete removes cell i.
func (nb *Notebook) Delete(i int) {
	nb.cells = append(nb.cells[:i], nb.cells[i+1:]...)
}

// newID returns a cell id no cell has: 8 hex digits, like Jupyter's.
func (nb *Notebook) newID() string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if _, err := nb.Find(id); err != nil {
			return id
		}
	}
}

// lines splits s the way Jupyter stores sources: a list of lines, each
// but the last ending in "\n".
func lines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// multiline joins an nbformat multiline string: a string, or a list of
// strings.
func multiline(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, "")
	}
	return ""
}
