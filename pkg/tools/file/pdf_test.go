package file

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/testpdf"
	"github.com/toolwire/toolwire/pkg/tool"
)

func writeBytes(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// document returns the PDF of a successful PDF read, checking the result's
// shape: a text block, then the document.
func document(t *testing.T, r *tool.Result) []byte {
	t.Helper()
	if r.IsError || len(r.Content) != 2 || !r.Content[0].IsText() || !r.Content[1].IsDocument() {
		t.Fatalf("result is not a PDF read: %+v", r)
	}
	return r.Content[1].Data
}

func TestReadPDF(t *testing.T) {
	env, dir := newEnv(t)
	small := testpdf.Text(t, 3)
	writeBytes(t, dir+"/small.pdf", small)
	writeBytes(t, dir+"/long.pdf", testpdf.Text(t, 25))
	writeBytes(t, dir+"/scan.pdf", testpdf.Scanned(t, 2))
	writeBytes(t, dir+"/locked.pdf", testpdf.Encrypt(t, small, "secret", "owner"))
	writeBytes(t, dir+"/restricted.pdf", testpdf.Encrypt(t, small, "", "owner"))

	t.Run("whole, as it is", func(t *testing.T) {
		r := call(t, &Read{}, env, `{"file_path":"small.pdf"}`)
		if !bytes.Equal(document(t, r), small) {
			t.Fatal("a whole small PDF was not sent as it is")
		}
		if got, want := r.Content[0].Text, "PDF file read: "+dir+"/small.pdf ("+formatSize(int64(len(small)))+", 3 pages)"; got != want {
			t.Errorf("text %q, want %q", got, want)
		}
		if _, ok := env.Reads.Get(dir + "/small.pdf"); !ok {
			t.Error("the read was not recorded")
		}
	})
	t.Run("a page range", func(t *testing.T) {
		for _, tt := range []struct {
			pages       string
			first, last int
		}{{"2-3", 2, 3}, {"2", 2, 2}, {"24-", 24, 25}, {"20-39", 20, 25}, {" 5 - 9 ", 5, 9}} {
			r := call(t, &Read{}, env, `{"file_path":"long.pdf","pages":"`+tt.pages+`"}`)
			pages := testpdf.Contents(t, document(t, r))
			if len(pages) != tt.last-tt.first+1 {
				t.Fatalf("pages %q: %d pages, want %d-%d", tt.pages, len(pages), tt.first, tt.last)
			}
			for i, c := range pages {
				if !strings.Contains(c, testpdf.PageText(tt.first+i)+")") {
					t.Errorf("pages %q: page %d shows %q, want %q", tt.pages, i+1, c, testpdf.PageText(tt.first+i))
				}
			}
			if want := "PDF file read: " + dir + "/long.pdf (pages " + strconv.Itoa(tt.first) + "-" + strconv.Itoa(tt.last) + " of 25)"; r.Content[0].Text != want {
				t.Errorf("text %q, want %q", r.Content[0].Text, want)
			}
		}
	})
	t.Run("scanned pages are sent with a note", func(t *testing.T) {
		r := call(t, &Read{}, env, `{"file_path":"scan.pdf"}`)
		document(t, r)
		if !strings.Contains(r.Content[0].Text, "no text layer") {
			t.Errorf("no note on the missing text layer: %q", r.Content[0].Text)
		}
		if strings.Contains(call(t, &Read{}, env, `{"file_path":"small.pdf"}`).Content[0].Text, "no text layer") {
			t.Error("a PDF with text got the scanned note")
		}
	})
	t.Run("encrypted with an empty user password: a plain copy", func(t *testing.T) {
		out := document(t, call(t, &Read{}, env, `{"file_path":"restricted.pdf"}`))
		if bytes.Equal(out, testpdf.Encrypt(t, small, "", "owner")) || testpdf.PageCount(t, out) != 3 {
			t.Fatal("the encrypted file was sent, or pages were lost")
		}
	})
	for _, tt := range []struct {
		name, input string
		want        want
	}{
		{"too many pages without pages", `{"file_path":"long.pdf"}`,
			want{text: `This PDF has 25 pages, too many to read at once. Use the pages parameter to read at most 20 pages per call, e.g. pages: "1-20".`, isError: true}},
		{"a range over 20 pages", `{"file_path":"long.pdf","pages":"1-21"}`,
			want{text: wrapped(`Page range "1-21" covers 21 pages; at most 20 pages can be read at once. Read it in parts, e.g. pages "1-20".`), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"an open range over 20 pages", `{"file_path":"long.pdf","pages":"2-"}`,
			want{text: wrapped(`Page range "2-" covers 24 pages; at most 20 pages can be read at once. Read it in parts, e.g. pages "2-21".`), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"past the end", `{"file_path":"small.pdf","pages":"4-5"}`,
			want{text: "Page 4 is past the end of the PDF: it has 3 pages.", isError: true}},
		{"bad range", `{"file_path":"small.pdf","pages":"3-1"}`,
			want{text: wrapped(`Invalid pages parameter: "3-1". Use formats like "1-5", "3", or "10-20". Pages are 1-indexed.`), isError: true, outcome: tool.OutcomeInvalidInput}},
		{"page zero", `{"file_path":"small.pdf","pages":"0"}`,
			want{text: wrapped(`Invalid pages parameter: "0". Use formats like "1-5", "3", or "10-20". Pages are 1-indexed.`), isError: true}},
		{"not a range", `{"file_path":"small.pdf","pages":"1,3"}`,
			want{text: wrapped(`Invalid pages parameter: "1,3". Use formats like "1-5", "3", or "10-20". Pages are 1-indexed.`), isError: true}},
		{"password-protected", `{"file_path":"locked.pdf"}`,
			want{text: "This PDF is password-protected, so it cannot be read. Make an unprotected copy first (for example `qpdf --password=PASSWORD --decrypt in.pdf out.pdf` in Bash) and Read that.", isError: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check(t, call(t, &Read{}, env, tt.input), tt.want)
		})
	}
}

func TestReadPDFSizeLimits(t *testing.T) {
	env, dir := newEnv(t)
	// Padding after the end of a PDF is ignored by readers: a valid
	// 3-page PDF just over the limit for a whole read.
	big := append(testpdf.Text(t, 3), bytes.Repeat([]byte("\n"), maxDocumentBytes)...)
	writeBytes(t, dir+"/big.pdf", big)
	check(t, call(t, &Read{}, env, `{"file_path":"big.pdf"}`), want{
		text:    `PDF file (10MB) is larger than the 10MB that can be read at once. Use the pages parameter to read it in parts of at most 20 pages, e.g. pages: "1-20".`,
		isError: true,
	})
	// With pages, the pages are cut out and the padding is gone.
	if out := document(t, call(t, &Read{}, env, `{"file_path":"big.pdf","pages":"1-3"}`)); len(out) > 1<<20 || testpdf.PageCount(t, out) != 3 {
		t.Fatalf("cut copy: %s", testpdf.String(out))
	}
}
