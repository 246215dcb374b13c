package pdfdoc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/internal/testpdf"
	"github.com/toolwire/toolwire/pkg/pdfdoc"
)

func open(t *testing.T, data []byte) *pdfdoc.Doc {
	t.Helper()
	d, err := pdfdoc.Open(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestOpenAndExtract(t *testing.T) {
	d := open(t, testpdf.Text(t, 5))
	if d.Pages != 5 || d.Encrypted || !d.HasText(1, 5) {
		t.Fatalf("pages %d, encrypted %v, text %v", d.Pages, d.Encrypted, d.HasText(1, 5))
	}
	out, err := d.Extract(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	pages := testpdf.Contents(t, out)
	if len(pages) != 2 || !strings.Contains(pages[0], testpdf.PageText(2)) || !strings.Contains(pages[1], testpdf.PageText(3)) {
		t.Fatalf("extracted pages: %q", pages)
	}
	if _, err := d.Extract(4, 6); err == nil {
		t.Fatal("extracting past the last page did not fail")
	}
}

func TestScannedPagesHaveNoText(t *testing.T) {
	d := open(t, testpdf.Scanned(t, 2))
	if d.Pages != 2 || d.HasText(1, 2) {
		t.Fatalf("pages %d, text %v", d.Pages, d.HasText(1, 2))
	}
}

func TestEncrypted(t *testing.T) {
	plain := testpdf.Text(t, 2)
	if _, err := pdfdoc.Open(context.Background(), testpdf.Encrypt(t, plain, "secret", "owner")); !errors.Is(err, pdfdoc.ErrEncrypted) {
		t.Fatalf("password-protected PDF: %v, want ErrEncrypted", err)
	}
	// Encrypted with an empty user password: readable, and Extract writes a
	// plain copy.
	d := open(t, testpdf.Encrypt(t, plain, "", "owner"))
	if !d.Encrypted || d.Pages != 2 {
		t.Fatalf("encrypted %v, pages %d", d.Encrypted, d.Pages)
	}
	out, err := d.Extract(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c := open(t, out); c.Encrypted || c.Pages != 2 {
		t.Fatalf("copy: encrypted %v, pages %d", c.Encrypted, c.Pages)
	}
	if pages := testpdf.Contents(t, out); !strings.Contains(pages[1], testpdf.PageText(2)) {
		t.Fatalf("copy's page 2: %q", pages[1])
	}
}

func TestInvalid(t *testing.T) {
	full := testpdf.Text(t, 3)
	for name, data := range map[string][]byte{
		"not a PDF": []byte("hello, world"),
		"empty":     {},
		"truncated": full[:len(full)/2],
	} {
		_, err := pdfdoc.Open(context.Background(), data)
		var inv *pdfdoc.InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("%s: %v, want *InvalidError", name, err)
		}
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if _, err := pdfdoc.Open(ctx, testpdf.Text(t, 2)); !errors.Is(err, cause) {
		t.Fatalf("%v, want the cancel cause", err)
	}
}

// Read calls run in parallel; pdfcpu must cope.
func TestConcurrentUse(t *testing.T) {
	docs := [][]byte{testpdf.Text(t, 4), testpdf.Scanned(t, 2), testpdf.Encrypt(t, testpdf.Text(t, 3), "", "o")}
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Go(func() {
			d, err := pdfdoc.Open(context.Background(), docs[i%3])
			if err != nil {
				t.Error(err)
				return
			}
			d.HasText(1, d.Pages)
			if _, err := d.Extract(1, d.Pages); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
