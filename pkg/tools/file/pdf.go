package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"

	"github.com/toolwire/toolwire/pkg/pdfdoc"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Limits of PDF reads. The first two are Claude Code's; the API takes at
// most 100 pages and 32 MB per request, and one result must also fit a
// gRPC message (base64 makes it a third larger).
const (
	// pdfWholePages is the most pages a PDF read without pages may have.
	pdfWholePages = 10
	// pdfRangePages is the most pages one read with pages returns.
	pdfRangePages = 20
	// maxDocumentBytes is the most binary content one Read returns: the
	// PDF sent, or the images of a notebook.
	maxDocumentBytes = 10 << 20
	// maxPDFFileBytes is the largest PDF opened to cut pages from.
	maxPDFFileBytes = 100 << 20
)

// pageRange is a range of PDF pages, 1-based and inclusive; last is 0 for
// "to the end".
type pageRange struct{ first, last int }

var pagesPattern = regexp.MustCompile(`^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$`)

// parsePages reads Read's pages parameter: "3", "1-5" or "10-" (to the
// end).
func parsePages(s string) (pageRange, error) {
	bad := tool.Invalid(fmt.Sprintf(`Invalid pages parameter: %q. Use formats like "1-5", "3", or "10-20". Pages are 1-indexed.`, s))
	m := pagesPattern.FindStringSubmatch(s)
	if m == nil {
		return pageRange{}, bad
	}
	first, err := strconv.Atoi(m[1])
	if err != nil || first < 1 {
		return pageRange{}, bad
	}
	r := pageRange{first: first, last: first}
	if m[2] != "" {
		r.last = 0
		if m[3] != "" {
			if r.last, err = strconv.Atoi(m[3]); err != nil || r.last < first {
				return pageRange{}, bad
			}
		}
	}
	if r.last != 0 && r.last-r.first+1 > pdfRangePages {
		return pageRange{}, tool.Invalid(fmt.Sprintf(`Page range %q covers %d pages; at most %d pages can be read at once. Read it in parts, e.g. pages "%d-%d".`,
			s, r.last-r.first+1, pdfRangePages, r.first, r.first+pdfRangePages-1))
	}
	return r, nil
}

// readPDF returns a PDF as a document block, whole or the pages asked
// for, after a line that says what was read.
func readPDF(ctx context.Context, env *tool.Env, p workspace.Path, f *os.File, fi fs.FileInfo, pages *pageRange) *tool.Result {
	switch {
	case fi.Size() > maxPDFFileBytes:
		return tool.Error(fmt.Sprintf("PDF file is too large (%s); PDFs up to %s can be read. Split it first (for example with qpdf in Bash) and Read the parts.",
			formatSize(fi.Size()), formatSize(maxPDFFileBytes)))
	case pages == nil && fi.Size() > maxDocumentBytes:
		return tool.Error(fmt.Sprintf("PDF file (%s) is larger than the %s that can be read at once. Use the pages parameter to read it in parts of at most %d pages, e.g. pages: \"1-%d\".",
			formatSize(fi.Size()), formatSize(maxDocumentBytes), pdfRangePages, pdfRangePages))
	}
	data, err := workspace.ReadAll(f, fi.Size(), maxPDFFileBytes)
	if err != nil {
		return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, err))
	}
	doc, err := pdfdoc.Open(ctx, data)
	var invalid *pdfdoc.InvalidError
	switch {
	case errors.Is(err, pdfdoc.ErrEncrypted):
		return tool.Error("This PDF is password-protected, so it cannot be read. Make an unprotected copy first (for example `qpdf --password=PASSWORD --decrypt in.pdf out.pdf` in Bash) and Read that.")
	case errors.As(err, &invalid):
		return tool.Error(fmt.Sprintf("The PDF file is not valid, so it cannot be read (%v).", invalid.Err))
	case err != nil:
		return tool.Error(fmt.Sprintf("Could not read %s: %v", p.Abs, err))
	case doc.Pages == 0:
		return tool.Error("The PDF file has no pages.")
	}

	first, last := 1, doc.Pages
	if pages != nil {
		if pages.first > doc.Pages {
			return tool.Error(fmt.Sprintf("Page %d is past the end of the PDF: it has %d pages.", pages.first, doc.Pages))
		}
		first, last = pages.first, doc.Pages
		if pages.last != 0 {
			last = min(pages.last, doc.Pages)
		}
		if last-first+1 > pdfRangePages {
			return tool.UseError(tool.OutcomeInvalidInput, fmt.Sprintf(`Page range "%d-" covers %d pages; at most %d pages can be read at once. Read it in parts, e.g. pages "%d-%d".`,
				first, last-first+1, pdfRangePages, first, first+pdfRangePages-1))
		}
	} else if doc.Pages > pdfWholePages {
		return tool.Error(fmt.Sprintf("This PDF has %d pages, too many to read at once. Use the pages parameter to read at most %d pages per call, e.g. pages: \"1-%d\".",
			doc.Pages, pdfRangePages, pdfRangePages))
	}

	// The file goes out as it is, unless only some pages are wanted, it is
	// encrypted (the API wants plain bytes) or too large as it is (a copy
	// drops what no page uses).
	out := data
	if first != 1 || last != doc.Pages || doc.Encrypted || len(data) > maxDocumentBytes {
		if out, err = doc.Extract(first, last); err != nil {
			return tool.Error(fmt.Sprintf("Could not cut pages %d-%d out of %s: %v", first, last, p.Abs, err))
		}
	}
	if len(out) > maxDocumentBytes {
		return tool.Error(fmt.Sprintf("Pages %d-%d make a PDF of %s, more than the %s that can be read at once. Read fewer pages per call.",
			first, last, formatSize(int64(len(out))), formatSize(maxDocumentBytes)))
	}

	text := fmt.Sprintf("PDF file read: %s (%s, %d pages)", p.Abs, formatSize(fi.Size()), doc.Pages)
	if first != 1 || last != doc.Pages {
		text = fmt.Sprintf("PDF file read: %s (pages %d-%d of %d)", p.Abs, first, last, doc.Pages)
	}
	if !doc.HasText(first, last) {
		// The API reads every page as an image too, so a scan still works;
		// the model should know the words come from pictures.
		text += "\nThese pages have no text layer (a scanned document?): their words can only be read from the page images, which may miss or misread some."
	}
	env.Reads.Set(p.Abs, tool.FileRead{ModTime: fi.ModTime(), Offset: 1})
	return &tool.Result{Content: []tool.Content{{Text: text}, tool.Document(out)}}
}
