// Package testpdf makes small PDFs for tests with pdfcpu, so that no test
// needs a binary fixture: pages of text, pages that hold only an image (as
// a scanned document does), and encrypted copies.
package testpdf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

var setup sync.Once

func config() *model.Configuration {
	setup.Do(api.DisableConfigDir)
	conf := model.NewDefaultConfiguration()
	conf.Offline = true
	return conf
}

// PageText is the text Text puts on page n (1-based).
func PageText(n int) string { return "toolwire test page " + strconv.Itoa(n) }

// Text returns a PDF of n pages; page i shows PageText(i).
func Text(t testing.TB, n int) []byte {
	t.Helper()
	type textBox struct {
		Value  string         `json:"value"`
		Anchor string         `json:"anchor"`
		Font   map[string]any `json:"font"`
	}
	pages := map[string]any{}
	for i := 1; i <= n; i++ {
		pages[strconv.Itoa(i)] = map[string]any{"content": map[string]any{"text": []textBox{{
			Value: PageText(i), Anchor: "center", Font: map[string]any{"name": "Helvetica", "size": 24},
		}}}}
	}
	spec, err := json.Marshal(map[string]any{"paper": "A6", "origin": "LowerLeft", "pages": pages})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := api.Create(nil, bytes.NewReader(spec), &out, config()); err != nil {
		t.Fatalf("testpdf: create %d pages: %v", n, err)
	}
	return out.Bytes()
}

// Scanned returns a PDF of n pages that hold only an image each, no text,
// as a scanner makes them.
func Scanned(t testing.TB, n int) []byte {
	t.Helper()
	imgs := make([]io.Reader, n)
	for i := range imgs {
		img := image.NewGray(image.Rect(0, 0, 40, 20))
		for x := range 40 {
			img.SetGray(x, 10, color.Gray{Y: uint8(i * 40)})
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		imgs[i] = &b
	}
	var out bytes.Buffer
	if err := api.ImportImages(nil, &out, imgs, nil, config()); err != nil {
		t.Fatalf("testpdf: import %d images: %v", n, err)
	}
	return out.Bytes()
}

// Encrypt returns data encrypted with AES-256. With an empty userPW any
// viewer opens it; with one, only who knows the password.
func Encrypt(t testing.TB, data []byte, userPW, ownerPW string) []byte {
	t.Helper()
	conf := config()
	conf.UserPW, conf.OwnerPW = userPW, ownerPW
	conf.EncryptUsingAES, conf.EncryptKeyLength = true, 256
	var out bytes.Buffer
	if err := api.Encrypt(bytes.NewReader(data), &out, conf); err != nil {
		t.Fatalf("testpdf: encrypt: %v", err)
	}
	return out.Bytes()
}

// PageCount returns the number of pages of data, failing the test if it is
// not a readable PDF.
func PageCount(t testing.TB, data []byte) int {
	t.Helper()
	n, err := api.PageCount(bytes.NewReader(data), config())
	if err != nil {
		t.Fatalf("testpdf: count pages: %v", err)
	}
	return n
}

// String describes data for a failure message.
func String(data []byte) string {
	return fmt.Sprintf("%d bytes starting %q", len(data), data[:min(len(data), 16)])
}

// Contents returns the decoded content stream of each page of data, in
// which the text a page shows appears as written.
func Contents(t testing.TB, data []byte) []string {
	t.Helper()
	ctx, err := api.ReadAndValidate(bytes.NewReader(data), config())
	if err != nil {
		t.Fatalf("testpdf: read: %v", err)
	}
	out := make([]string, ctx.PageCount)
	for i := range out {
		r, err := pdfcpu.ExtractPageContent(ctx, i+1)
		if err != nil {
			t.Fatalf("testpdf: page %d content: %v", i+1, err)
		}
		b, _ := io.ReadAll(r)
		out[i] = string(b)
	}
	return out
}
