package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Read is the Read tool: a file's text with line numbers, an image, a
// notebook's cells with their outputs, or a PDF as a document.
type Read struct {
	// MaxTokens caps the estimated size of one page; zero means
	// DefaultMaxTokens.
	MaxTokens int
}

var _ tool.Tool = (*Read)(nil)

type readInput struct {
	FilePath string     `json:"file_path"`
	Offset   lineNumber `json:"offset"`
	Limit    lineNumber `json:"limit"`
	Pages    *string    `json:"pages"`
}

// Spec describes Read.
func (r *Read) Spec() tool.Spec {
	return tool.Spec{
		Name:             "Read",
		Description:      readDescription,
		InputSchema:      json.RawMessage(readSchema),
		ValidationSchema: json.RawMessage(readValidationSchema),
		ReadOnly:         true,
		Concurrency:      tool.ConcurrencyAlways,
	}
}

// ConcurrencySafe reports true: reads never conflict.
func (r *Read) ConcurrencySafe(json.RawMessage) bool { return true }

// Validate checks the path and the pages range, and refuses known binary
// formats.
func (r *Read) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, err := r.prepare(env, input)
	return err
}

// Prepare checks the input as Validate does and keeps what it worked out
// for Run.
func (r *Read) Prepare(_ context.Context, env *tool.Env, input json.RawMessage) (any, error) {
	prep, err := r.prepare(env, input)
	if err != nil {
		return nil, err
	}
	return prep, nil
}

// readPrepared is what Read's checks work out: the decoded input, the
// resolved path and the page range.
type readPrepared struct {
	in    readInput
	path  workspace.Path
	pages *pageRange
}

func (r *Read) prepare(env *tool.Env, input json.RawMessage) (*readPrepared, error) {
	var in readInput
	if err := decode(input, &in); err != nil {
		return nil, err
	}
	var pages *pageRange
	if in.Pages != nil {
		// Checked whatever the file, as Claude Code does.
		pr, err := parsePages(*in.Pages)
		if err != nil {
			return nil, err
		}
		pages = &pr
	}
	p, err := resolve(env, in.FilePath)
	if err != nil {
		return nil, err
	}
	if ext := extension(p.Abs); binaryExtensions[ext] {
		return nil, tool.Invalid(binaryMessage(ext))
	}
	return &readPrepared{in: in, path: p, pages: pages}, nil
}

// Run reads the file.
func (r *Read) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	prep, ok := call.Prepared.(*readPrepared)
	if !ok {
		var err error
		if prep, err = r.prepare(env, call.Input); err != nil {
			return failed(err)
		}
	}
	in, p, pages := prep.in, prep.path, prep.pages
	switch ext := extension(p.Abs); {
	case ext == "pdf", ext == "ipynb", imageTypes[ext] != "":
	default:
		// A text file small enough to keep whole: read it in one go. One
		// too large to read without a range is left to Open, to refuse.
		limit := int64(maxTrackedBytes)
		if in.Offset <= 1 && in.Limit <= 0 {
			limit = min(limit, env.Limits.WithDefaults().MaxReadBytes)
		}
		data, fi, ok, err := env.Files.ReadSmall(p, limit)
		switch {
		case ok && err != nil:
			return failed(asToolError(err))
		case ok:
			return r.readText(ctx, env, p, nil, data, fi, in)
		}
	}
	f, fi, err := env.Files.Open(p)
	switch {
	case notExist(err):
		return tool.Error(fileNotFound(env))
	case err != nil:
		return failed(asToolError(err))
	}
	defer f.Close()
	if fi.IsDir() {
		return tool.Error(fmt.Sprintf("EISDIR: illegal operation on a directory, read '%s'", p.Abs))
	}
	switch ext := extension(p.Abs); {
	case ext == "pdf":
		return readPDF(ctx, env, p, f, fi, pages)
	case ext == "ipynb":
		return r.readNotebook(ctx, env, p, f, fi, in)
	case imageTypes[ext] != "":
		return readImage(env, p, f, fi, imageTypes[ext])
	}
	return r.readText(ctx, env, p, f, nil, fi, in)
}

// readText reads a text file from f, or from data when the file was read
// whole already (f is then nil).
func (r *Read) readText(ctx context.Context, env *tool.Env, p workspace.Path, f *os.File, data []byte, fi fs.FileInfo, in readInput) *tool.Result {
	offset, limit := max(int(in.Offset), 1), max(int(in.Limit), 0)
	maxBytes := env.Limits.WithDefaults().MaxReadBytes
	if offset == 1 && limit == 0 && fi.Size() > maxBytes {
		return tool.Error(fmt.Sprintf("File content (%s) exceeds maximum allowed size (%s). Use offset and limit parameters to read specific portions of the file, or search for specific content instead of reading the whole file.",
			formatSize(fi.Size()), formatSize(maxBytes)))
	}

	// Keep small files whole, for the read record; stream large ones.
	var (
		src     lineSource
		head    []byte
		content string
		tracked = fi.Size() <= maxTrackedBytes
	)
	if tracked {
		if data == nil {
			var err error
			if data, err = workspace.ReadAll(f, fi.Size(), maxTrackedBytes); err != nil {
				return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, err))
			}
		}
		// data was read for this call alone and is never written again,
		// so the content shares its memory rather than copy it.
		content, head = unsafe.String(unsafe.SliceData(data), len(data)), data[:min(len(data), binarySniffBytes)]
		src = &stringLines{rest: content}
	} else {
		br := bufio.NewReaderSize(f, 64<<10)
		head, _ = br.Peek(binarySniffBytes)
		src = readerLines{br}
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return tool.UseError(tool.OutcomeInvalidInput, binaryMessage(extension(p.Abs)))
	}

	if prev, ok := env.Reads.Get(p.Abs); ok && prev.Offset == offset && prev.Limit == limit &&
		prev.ModTime.Equal(fi.ModTime()) && (!tracked || prev.Content == content) {
		return tool.Text(msgUnchanged)
	}

	maxTokens := orDefault(r.MaxTokens, DefaultMaxTokens)
	sel, err := selectLines(ctx, src, offset, limit, maxTokens*4)
	if err != nil {
		return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, err))
	}
	record := tool.FileRead{ModTime: fi.ModTime(), Offset: offset, Limit: limit}
	if tracked {
		record.Content = content
	}

	var text string
	switch tokens := (sel.runes + 3) / 4; {
	case len(sel.lines) == 0 || (len(sel.lines) == 1 && sel.lines[0] == ""):
		text = fmt.Sprintf("<system-reminder>Warning: the file exists but is shorter than the provided offset (%d). The file has %d lines.</system-reminder>", offset, sel.total)
	case tokens > maxTokens:
		n := pageLines(sel.lines, offset, maxTokens*tokenPageFraction/100*4)
		record.Limit = n
		text = fmt.Sprintf("<system-reminder>[Truncated: PARTIAL view — showing lines %d-%d of %d total (%d tokens, cap %d). Call Read with offset=%d limit=%d for the next page, or Grep to find a specific section. Do NOT answer from this page alone if the answer may be further in the file.]</system-reminder>\n\n",
			offset, offset+n-1, sel.total, tokens, maxTokens, offset+n, n) + numbered(sel.lines[:n], offset)
	default:
		text = numbered(sel.lines, offset)
	}
	env.Reads.Set(p.Abs, record)
	return tool.Text(text)
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// selection is the requested range of a file's lines.
type selection struct {
	lines []string // the lines kept, at least maxRunes' worth when the range is longer
	total int      // lines in the whole file
	runes int      // size of the whole range once numbered
}

// lineSource yields a file's lines in order, each without its "\n"; the
// text after the last "\n" is a line too, so "a\n" has two lines.
type lineSource interface {
	next() (line string, last bool, err error)
}

// stringLines yields the lines of a text held in memory, as substrings of
// it.
type stringLines struct{ rest string }

func (l *stringLines) next() (string, bool, error) {
	i := strings.IndexByte(l.rest, '\n')
	if i < 0 {
		line := l.rest
		l.rest = ""
		return line, true, nil
	}
	line := l.rest[:i]
	l.rest = l.rest[i+1:]
	return line, false, nil
}

// readerLines yields the lines of a file read as they are needed.
type readerLines struct{ r *bufio.Reader }

func (l readerLines) next() (string, bool, error) {
	s, err := l.r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, err
	}
	return strings.TrimSuffix(s, "\n"), err != nil, nil
}

// selectLines reads lines offset .. offset+limit-1 (1-based; limit 0: to the
// end) from src, counting every line of the file; a trailing "\r" is
// dropped from the lines kept. Once the kept lines pass maxRunes it stops
// keeping them but goes on measuring.
func selectLines(ctx context.Context, src lineSource, offset, limit, maxRunes int) (selection, error) {
	var sel selection
	if l, ok := src.(*stringLines); ok {
		// The lines the range keeps, as far as a page of them goes, in one
		// allocation.
		n := strings.Count(l.rest, "\n") + 1 - offset + 1
		if limit > 0 {
			n = min(n, limit)
		}
		sel.lines = make([]string, 0, min(max(n, 0), maxPresizedLines))
	}
	kept := 0
	for {
		s, last, err := src.next()
		if err != nil {
			return sel, err
		}
		sel.total++
		if sel.total >= offset && (limit == 0 || sel.total < offset+limit) {
			s = strings.TrimSuffix(s, "\r")
			n := numberWidth(sel.total) + 2 + utf8.RuneCountInString(s)
			sel.runes += n
			if kept <= maxRunes {
				sel.lines = append(sel.lines, s)
				kept += n
			}
		}
		if last {
			return sel, nil
		}
		if sel.total%4096 == 0 && ctx.Err() != nil {
			return sel, context.Cause(ctx)
		}
	}
}

// pageLines returns how many of lines, numbered from first, fit in
// maxRunes; at least one.
func pageLines(lines []string, first, maxRunes int) int {
	used := 0
	for i, l := range lines {
		used += numberWidth(first+i) + 2 + utf8.RuneCountInString(l)
		if used > maxRunes {
			return max(i, 1)
		}
	}
	return len(lines)
}

// maxPresizedLines bounds the room selectLines makes for lines up front:
// a long file's range keeps only a page of them.
const maxPresizedLines = 4096

// numberWidth returns the number of decimal digits of n >= 0.
func numberWidth(n int) int {
	w := 1
	for ; n >= 10; n /= 10 {
		w++
	}
	return w
}

// numbered renders lines as "N\tline", numbered from first, like cat -n
// without the padding.
func numbered(lines []string, first int) string {
	size := len(lines) * (numberWidth(first+len(lines)) + 2)
	for _, l := range lines {
		size += len(l)
	}
	var b strings.Builder
	b.Grow(size)
	var num [20]byte
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.Write(strconv.AppendInt(num[:0], int64(first+i), 10))
		b.WriteByte('\t')
		b.WriteString(l)
	}
	return b.String()
}

func readImage(env *tool.Env, p workspace.Path, f *os.File, fi fs.FileInfo, mediaType string) *tool.Result {
	if fi.Size() > maxImageBytes {
		return tool.Error(fmt.Sprintf("Image file is too large (%s); images up to %s can be read. Make a smaller copy (for example with ImageMagick in Bash) and Read that.",
			formatSize(fi.Size()), formatSize(maxImageBytes)))
	}
	data, err := workspace.ReadAll(f, fi.Size(), maxImageBytes)
	if err != nil {
		return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, err))
	}
	// The API rejects an image whose declared type differs from its bytes.
	if sniffed := sniffImage(data); sniffed != "" {
		mediaType = sniffed
	}
	env.Reads.Set(p.Abs, tool.FileRead{ModTime: fi.ModTime(), Offset: 1})
	return &tool.Result{Content: []tool.Content{{MediaType: mediaType, Data: data}}}
}

// imageTypes are the image formats Read returns as images.
var imageTypes = map[string]string{
	"png":  "image/png",
	"jpg":  "image/jpeg",
	"jpeg": "image/jpeg",
	"gif":  "image/gif",
	"webp": "image/webp",
}

func sniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && bytes.HasPrefix(b, []byte("RIFF")) && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// extension returns the lower-case extension of name without the dot.
func extension(name string) string {
	return strings.ToLower(strings.TrimPrefix(filepath.Ext(name), "."))
}

func binaryMessage(ext string) string {
	kind := "binary file"
	if ext != "" {
		kind = "binary ." + ext + " file"
	}
	return "This tool cannot read binary files. The file appears to be a " + kind + ". Please use appropriate tools for binary file analysis."
}

// binaryExtensions are formats Read refuses without looking inside:
// archives, executables, media other than the images above, databases,
// fonts and office documents.
var binaryExtensions = func() map[string]bool {
	m := make(map[string]bool)
	for ext := range strings.FieldsSeq(`
		zip tar gz tgz bz2 xz zst 7z rar lz4 lzma jar war ear apk ipa deb rpm dmg iso img
		exe dll so dylib o a lib obj ko elf bin dat class pyc pyo pyd wasm node
		mp3 mp4 m4a m4v wav flac ogg oga ogv opus aac wma avi mov mkv webm flv wmv mpg mpeg
		bmp ico tif tiff psd raw heic heif avif
		ttf otf woff woff2 eot
		sqlite sqlite3 db mdb accdb parquet avro orc pkl pickle npy npz h5 hdf5 pt pth onnx safetensors
		doc docx xls xlsx ppt pptx odt ods odp
		swf fla blend 3ds max dwg
	`) {
		m[ext] = true
	}
	return m
}()
