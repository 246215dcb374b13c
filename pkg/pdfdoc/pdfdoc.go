// Package pdfdoc reads what the Read tool needs to know of a PDF — how many
// pages it has, whether it is encrypted, whether its pages carry text — and
// cuts a range of pages out of it into a smaller PDF. It wraps pdfcpu.
//
// It does not extract text or render pages: the Messages API does both with
// the document it is sent. Nothing here touches the file system; callers
// read the file (through the session's workspace) and pass its bytes.
package pdfdoc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

// ErrEncrypted is returned for a PDF that cannot be opened without a
// password.
var ErrEncrypted = errors.New("pdfdoc: the PDF is encrypted and needs a password to open")

// InvalidError is returned for bytes that are not a PDF pdfcpu can read.
type InvalidError struct{ Err error }

// Error describes the problem.
func (e *InvalidError) Error() string { return "pdfdoc: not a readable PDF: " + e.Err.Error() }

// Unwrap returns the parser's error.
func (e *InvalidError) Unwrap() error { return e.Err }

// Doc is a parsed PDF.
type Doc struct {
	ctx *model.Context
	// Pages is the number of pages.
	Pages int
	// Encrypted is true for a PDF encrypted with an empty user password:
	// every viewer opens it, but its bytes are not plain. Extract writes
	// an unencrypted copy.
	Encrypted bool
}

// setup keeps pdfcpu away from the user's configuration directory: by
// default it creates one on first use and reads fonts from it.
var setup sync.Once

func config() *model.Configuration {
	setup.Do(api.DisableConfigDir)
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	// Never reach out for certificate revocation lists or the like.
	conf.Offline = true
	return conf
}

// Open parses data. A PDF that needs a password yields ErrEncrypted;
// anything pdfcpu cannot read, an *InvalidError.
func Open(ctx context.Context, data []byte) (*Doc, error) {
	conf := config()
	conf.Cmd = model.TRIM
	pc, err := read(ctx, data, conf)
	if err != nil {
		return nil, err
	}
	if err := api.ValidateContext(pc); err != nil {
		return nil, &InvalidError{Err: err}
	}
	if err := pdfcpu.OptimizeXRefTable(pc); err != nil {
		return nil, &InvalidError{Err: err}
	}
	return &Doc{ctx: pc, Pages: pc.PageCount, Encrypted: pc.Encrypt != nil}, nil
}

// read builds pdfcpu's model of data, which panics on some malformed
// input instead of failing.
func read(ctx context.Context, data []byte, conf *model.Configuration) (pc *model.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			pc, err = nil, &InvalidError{Err: fmt.Errorf("parser failure: %v", r)}
		}
	}()
	pc, err = pdfcpu.ReadWithContext(ctx, bytes.NewReader(data), conf)
	switch {
	case errors.Is(err, pdfcpu.ErrWrongPassword):
		return nil, ErrEncrypted
	case err != nil && ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case err != nil:
		return nil, &InvalidError{Err: err}
	}
	return pc, nil
}

// HasText reports whether any of pages first..last uses a font, that is,
// draws text. A scanned document's pages hold only images.
func (d *Doc) HasText(first, last int) bool {
	for p := first; p <= last; p++ {
		if len(pdfcpu.FontObjNrs(d.ctx, p)) > 0 {
			return true
		}
	}
	return false
}

// Extract returns a new PDF holding pages first..last (1-based, inclusive)
// and nothing else of the document.
func (d *Doc) Extract(first, last int) (out []byte, err error) {
	if first < 1 || last < first || last > d.Pages {
		return nil, fmt.Errorf("pdfdoc: pages %d-%d outside 1-%d", first, last, d.Pages)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &InvalidError{Err: fmt.Errorf("writer failure: %v", r)}
		}
	}()
	nrs := make([]int, 0, last-first+1)
	for p := first; p <= last; p++ {
		nrs = append(nrs, p)
	}
	dest, err := pdfcpu.ExtractPages(d.ctx, nrs, false)
	if err != nil {
		return nil, &InvalidError{Err: err}
	}
	var buf bytes.Buffer
	if err := api.WriteContext(dest, &buf); err != nil {
		return nil, fmt.Errorf("pdfdoc: write pages %d-%d: %w", first, last, err)
	}
	return buf.Bytes(), nil
}
