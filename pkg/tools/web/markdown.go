package web

import (
	"mime"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
)

// kind is how WebFetch reads a body of a content type.
type kind int

const (
	kindOther kind = iota // not text: refused
	kindHTML              // converted to Markdown
	kindText              // returned as it is
)

// contentKind classifies a Content-Type header; a missing one is taken
// for HTML, as browsers sniff most pages to be.
func contentKind(header string) kind {
	if strings.TrimSpace(header) == "" {
		return kindHTML
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return kindOther
	}
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/javascript", mt == "application/x-yaml", mt == "application/yaml":
		return kindText
	}
	return kindOther
}

// toMarkdown converts an HTML page to Markdown, links made absolute
// against pageURL. Scripts, styles and the like are left out.
func toMarkdown(html, pageURL string) (string, error) {
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))
	return conv.ConvertString(html, converter.WithDomain(pageURL))
}
