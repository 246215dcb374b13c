package web

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html/charset"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Limits of WebFetch, Claude Code's where it has them.
const (
	// DefaultMaxBytes is how much of a body is read; the rest is cut.
	DefaultMaxBytes = 10 << 20
	// DefaultMaxChars is how much Markdown a result carries; the rest is
	// cut.
	DefaultMaxChars = 100_000
	// maxURLLength is the longest URL taken.
	maxURLLength = 2000
	// maxRedirects is how many same-host redirects are followed.
	maxRedirects = 10
)

// Tools returns the web tools.
func Tools() []tool.Tool { return []tool.Tool{&WebFetch{}} }

// WebFetch is the WebFetch tool. The zero value uses the system's
// resolver, dialer and certificate roots and the default limits; tests
// set the fields.
type WebFetch struct {
	// Resolver resolves host names; nil means the system's.
	Resolver egress.Resolver
	// Dial opens TCP connections to checked "ip:port" addresses; nil
	// means a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// RootCAs verifies servers; nil means the system's roots (which
	// SSL_CERT_FILE and SSL_CERT_DIR can replace).
	RootCAs *x509.CertPool
	// MaxBytes and MaxChars replace DefaultMaxBytes and DefaultMaxChars.
	MaxBytes int64
	MaxChars int
}

var _ tool.Tool = (*WebFetch)(nil)

type fetchInput struct {
	URL    string `json:"url"`
	Prompt string `json:"prompt"`
}

// Structured is the structured data of a WebFetch result, the shape of
// Claude Code's WebFetch output where it has the field. The orchestrator
// reads it to decide whether the result is a page to apply the prompt to
// (Redirect empty, not an error).
type Structured struct {
	// URL is the page's URL after same-host redirects (for a redirect
	// result, the URL asked for).
	URL string `json:"url"`
	// Code and CodeText are the final response's status.
	Code     int    `json:"code"`
	CodeText string `json:"codeText"`
	// Bytes is the size of the body read.
	Bytes int `json:"bytes"`
	// DurationMs is how long the fetch took (0 when cached).
	DurationMs int64 `json:"durationMs"`
	// Cached says the page came from the session's cache.
	Cached bool `json:"cached,omitempty"`
	// Truncated says the body or the Markdown was cut.
	Truncated bool `json:"truncated,omitempty"`
	// Redirect is the URL of another host the page redirects to; the
	// result then reports the redirect instead of a page.
	Redirect string `json:"redirect,omitempty"`
}

// Spec describes WebFetch.
func (f *WebFetch) Spec() tool.Spec {
	return tool.Spec{
		Name:        "WebFetch",
		Description: webFetchDescription,
		InputSchema: json.RawMessage(webFetchSchema),
		ReadOnly:    true,
		Concurrency: tool.ConcurrencyAlways,
	}
}

// ConcurrencySafe reports true: fetches change nothing.
func (f *WebFetch) ConcurrencySafe(json.RawMessage) bool { return true }

// Validate checks the URL and that the session's policy may reach its
// host by name.
func (f *WebFetch) Validate(_ context.Context, env *tool.Env, input json.RawMessage) error {
	_, _, err := f.prepare(env, input)
	return err
}

// prepare parses the input, upgrades http to https, and applies the
// policy's name rules.
func (f *WebFetch) prepare(env *tool.Env, input json.RawMessage) (fetchInput, *url.URL, error) {
	var in fetchInput
	if err := json.Unmarshal(input, &in); err != nil {
		return in, nil, tool.Invalid(err.Error())
	}
	u, err := parseURL(in.URL)
	if err != nil {
		return in, nil, err
	}
	if env.Web == nil {
		return in, nil, &tool.DeniedError{Msg: noNetworkMessage}
	}
	if d := env.Web.Check(u.Hostname(), port(u)); d != nil {
		return in, nil, &tool.DeniedError{Msg: refusedMessage(u.String(), d, env.Web)}
	}
	return in, u, nil
}

// parseURL takes an absolute http or https URL without credentials, and
// returns it with http upgraded to https, as Claude Code does.
func parseURL(raw string) (*url.URL, error) {
	invalid := tool.Invalid(fmt.Sprintf("Invalid URL %q: give a complete http:// or https:// URL.", raw))
	if len(raw) > maxURLLength {
		return nil, tool.Invalid(fmt.Sprintf("The URL is %d characters long; the longest taken is %d.", len(raw), maxURLLength))
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Hostname() == "" {
		return nil, invalid
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, invalid
	}
	if u.User != nil {
		return nil, tool.Invalid("The URL holds a user name or password; WebFetch does not send credentials.")
	}
	u.Scheme = "https"
	u.Fragment = ""
	return u, nil
}

// port returns u's port, or the scheme's.
func port(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

// Messages of refusals.
const noNetworkMessage = `WebFetch cannot fetch anything in this session: its sandbox network policy is "none" (loopback only), ` +
	`which WebFetch follows too. The user can allow network access with --network host, or --network allowlist with --allowed-domains.`

// refusedMessage says that the policy refused target, and what it allows.
func refusedMessage(target string, d *egress.Denial, p *egress.Policy) string {
	msg := fmt.Sprintf("WebFetch refused %s: %s.", target, d.Error())
	entries := p.AllowedEntries()
	switch {
	case len(entries) == 1 && entries[0] == "*":
		msg += " This session may fetch from public addresses"
	case len(entries) == 0:
		return msg + " This session's network policy allows no host."
	default:
		msg += " This session's network policy allows only " + strings.Join(entries, ", ")
	}
	return msg + "; loopback, private and link-local addresses are refused unless the operator allows them (--allowed-addresses)."
}

// errTimeout is the cause of a fetch that ran out of time.
var errTimeout = errors.New("web fetch timed out")

// Run fetches the page.
func (f *WebFetch) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	in, u, err := f.prepare(env, call.Input)
	if err != nil {
		return tool.ValidationResult(err)
	}
	target := u.String()
	c := sessionCache(env)
	if p, ok := c.get(target, time.Now()); ok {
		return pageResult(p, true)
	}
	timeout := env.Limits.WebFetchTimeout
	if timeout <= 0 {
		timeout = tool.DefaultWebFetchTimeout
	}
	if call.Timeout > 0 && call.Timeout < timeout {
		timeout = call.Timeout
	}
	fctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	start := time.Now()
	p, redirect, err := f.fetch(fctx, env.Web, u)
	switch {
	case err == nil && redirect != nil:
		return redirectResult(target, in.Prompt, redirect)
	case err == nil:
		p.at = time.Now()
		c.put(target, p)
		res := pageResult(p, false)
		res.Structured = structured(p, time.Since(start), false)
		return res
	}
	var d *egress.Denial
	switch {
	case errors.As(err, &d):
		return tool.UseError(tool.OutcomeSandboxDenied, refusedMessage(target, d, env.Web))
	case errors.Is(context.Cause(fctx), errTimeout) && ctx.Err() == nil:
		r := tool.Error(fmt.Sprintf("WebFetch of %s timed out after %s.", target, timeout))
		r.Outcome = tool.OutcomeTimeout
		return r
	case ctx.Err() != nil:
		r := tool.Error(fmt.Sprintf("WebFetch of %s was stopped: %v", target, context.Cause(ctx)))
		r.Outcome = tool.OutcomeInterrupted
		return r
	}
	return tool.Error(fmt.Sprintf("WebFetch of %s failed: %v", target, err))
}

// redirect is a redirect to another host.
type redirect struct {
	to       string
	code     int
	codeText string
}

// fetch gets u under pol: the page, or the redirect to another host that
// ended it.
func (f *WebFetch) fetch(ctx context.Context, pol *egress.Policy, u *url.URL) (*page, *redirect, error) {
	dialer := &egress.Dialer{Policy: *pol, Resolver: f.Resolver, Dial: f.Dial}
	transport := &http.Transport{
		Proxy:               nil, // the policy is applied here, not by a proxy
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: f.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 15 * time.Second,
		// Every request dials, and every dial is checked: a reused
		// connection would skip the check of a redirect's host.
		DisableKeepAlives: true,
		ForceAttemptHTTP2: true,
	}
	defer transport.CloseIdleConnections()
	var denied *egress.Denial
	client := &http.Client{Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if sameSite(via[len(via)-1].URL, req.URL) {
			return nil
		}
		if d := pol.Check(req.URL.Hostname(), port(req.URL)); d != nil {
			denied = d
			return d
		}
		return http.ErrUseLastResponse
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/markdown, text/html;q=0.9, */*;q=0.8")
	req.Header.Set("User-Agent", "toolwire-WebFetch/1")
	resp, err := client.Do(req)
	if err != nil {
		if denied != nil {
			return nil, nil, denied
		}
		return nil, nil, unwrapURLError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc, err := resp.Location()
		if err != nil {
			return nil, nil, fmt.Errorf("redirect (%s) without a usable Location", resp.Status)
		}
		return nil, &redirect{to: loc.String(), code: resp.StatusCode, codeText: http.StatusText(resp.StatusCode)}, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil, nil, fmt.Errorf("the server answered %s", resp.Status)
	}
	k := contentKind(resp.Header.Get("Content-Type"))
	if k == kindOther {
		return nil, nil, fmt.Errorf("its content type %q is not text or HTML, which WebFetch reads", resp.Header.Get("Content-Type"))
	}
	maxBytes := f.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err == nil {
		// A body cut by the deadline can end like a whole one.
		err = context.Cause(ctx)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the page: %w", unwrapURLError(err))
	}
	cutBytes := int64(len(body)) > maxBytes
	if cutBytes {
		body = body[:maxBytes]
	}
	text, err := decodeText(body, resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, err
	}
	final := resp.Request.URL.String()
	if k == kindHTML {
		if text, err = toMarkdown(text, final); err != nil {
			return nil, nil, fmt.Errorf("convert the page to Markdown: %w", err)
		}
	}
	p := &page{url: final, code: resp.StatusCode, codeText: http.StatusText(resp.StatusCode), bytes: len(body)}
	p.markdown, p.truncated = f.cut(strings.TrimSpace(text), cutBytes, maxBytes)
	return p, nil, nil
}

// cut shortens the Markdown to the character limit, and notes what was
// left out.
func (f *WebFetch) cut(md string, cutBytes bool, maxBytes int64) (string, bool) {
	maxChars := f.MaxChars
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	var notes []string
	if cutBytes {
		notes = append(notes, fmt.Sprintf("[The page is larger than %d bytes; only its first %d bytes were read.]", maxBytes, maxBytes))
	}
	if r := []rune(md); len(r) > maxChars {
		md = string(r[:maxChars])
		notes = append(notes, fmt.Sprintf("[Content truncated: the page's Markdown is %d characters long; only its first %d are shown.]", len(r), maxChars))
	}
	if len(notes) == 0 {
		return md, false
	}
	return md + "\n\n" + strings.Join(notes, "\n"), true
}

// decodeText turns a body into UTF-8 text, by its declared or sniffed
// character set.
func decodeText(body []byte, contentType string) (string, error) {
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return string(body), nil
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("decode the page's text: %w", err)
	}
	return string(out), nil
}

// sameSite reports whether a redirect from a to b may be followed: the
// same scheme and port, no credentials, and the same host but for a
// leading "www.".
func sameSite(a, b *url.URL) bool {
	if a.Scheme != b.Scheme || port(a) != port(b) || b.User != nil {
		return false
	}
	strip := func(h string) string { return strings.TrimPrefix(strings.ToLower(h), "www.") }
	return strip(a.Hostname()) == strip(b.Hostname())
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats the
// method and URL the result already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func structured(p *page, took time.Duration, cached bool) json.RawMessage {
	s := Structured{URL: p.url, Code: p.code, CodeText: p.codeText, Bytes: p.bytes, DurationMs: took.Milliseconds(), Cached: cached, Truncated: p.truncated}
	b, _ := json.Marshal(s)
	return b
}

// pageResult is the result of a fetched page: its Markdown.
func pageResult(p *page, cached bool) *tool.Result {
	r := tool.Text(p.markdown)
	r.Structured = structured(p, 0, cached)
	return r
}

// redirectResult reports a redirect to another host, in the shape Claude
// Code's WebFetch reports it, so the model calls WebFetch again.
func redirectResult(from, prompt string, r *redirect) *tool.Result {
	var b strings.Builder
	b.WriteString("REDIRECT DETECTED: The URL redirects to a different host.\n\n")
	fmt.Fprintf(&b, "Original URL: %s\nRedirect URL: %s\nStatus: %d %s\n\n", from, r.to, r.code, r.codeText)
	b.WriteString("The page was not fetched from the new host. To get it, call WebFetch again with:\n")
	fmt.Fprintf(&b, "- url: %q\n- prompt: %q", r.to, prompt)
	res := tool.Text(b.String())
	s, _ := json.Marshal(Structured{URL: from, Code: r.code, CodeText: r.codeText, Redirect: r.to})
	res.Structured = s
	return res
}
