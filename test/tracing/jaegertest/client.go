package jaegertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client reads from a Jaeger v2 query service over HTTP.
//
// Search uses the API the Jaeger UI uses (/api/traces), the one that can
// filter by span attributes ("tags") and the one docs/observability.md shows.
// Traces are read from API v3 (/api/v3/traces/{id}), which returns them in
// OTLP's own JSON form: typed attributes, parent span ids and resources as
// the services sent them.
type Client struct {
	// BaseURL is the query service's address, e.g. "http://127.0.0.1:16686".
	BaseURL string
	// HTTP is the client used; nil uses one without keep-alive, so that no
	// idle connection outlives a test.
	HTTP *http.Client
}

// NewClient returns a client of the query service at baseURL.
func NewClient(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/")}
}

// ErrNotFound is returned when the query service has no such trace, or no
// trace matches a search.
var ErrNotFound = errors.New("jaeger: not found")

// get fetches path (with query) and decodes the JSON body into out.
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	u := c.BaseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = httpClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("GET %s: %w", u, ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, tail(string(body), 500))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: decode: %w", u, err)
	}
	return nil
}

// Services returns the names of the services that sent spans.
func (c *Client) Services(ctx context.Context) ([]string, error) {
	var resp struct {
		Services []string `json:"services"`
	}
	if err := c.get(ctx, "/api/v3/services", nil, &resp); err != nil {
		return nil, err
	}
	return resp.Services, nil
}

// Search says which traces to find.
type Search struct {
	// Service is the service one of the trace's spans belongs to; required.
	Service string
	// Operation, when set, is the name of such a span.
	Operation string
	// Tags are attributes such a span (or its resource) carries.
	Tags map[string]string
	// Lookback is how far back the traces start; zero means the query
	// service's default.
	Lookback time.Duration
	// Limit is the most traces returned; zero means the service's default.
	Limit int
}

// FindTraceIDs returns the ids of the traces that match s, newest first as
// the query service orders them. It returns ErrNotFound when none do.
func (c *Client) FindTraceIDs(ctx context.Context, s Search) ([]string, error) {
	q := url.Values{"service": {s.Service}}
	if s.Operation != "" {
		q.Set("operation", s.Operation)
	}
	if len(s.Tags) > 0 {
		b, err := json.Marshal(s.Tags)
		if err != nil {
			return nil, err
		}
		q.Set("tags", string(b))
	}
	if s.Lookback > 0 {
		now := time.Now()
		q.Set("start", fmt.Sprint(now.Add(-s.Lookback).UnixMicro()))
		q.Set("end", fmt.Sprint(now.Add(time.Minute).UnixMicro()))
	}
	if s.Limit > 0 {
		q.Set("limit", fmt.Sprint(s.Limit))
	}
	var resp struct {
		Data []struct {
			TraceID string `json:"traceID"`
		} `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	if err := c.get(ctx, "/api/traces", q, &resp); err != nil {
		return nil, err
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("jaeger: search %v: %v", q, resp.Errors)
	}
	var ids []string
	for _, d := range resp.Data {
		ids = append(ids, d.TraceID)
	}
	if len(ids) == 0 {
		return nil, ErrNotFound
	}
	return ids, nil
}

// Trace returns every span of the trace with the given hex id.
func (c *Client) Trace(ctx context.Context, traceID string) (*Trace, error) {
	var resp struct {
		Result otlpTraces `json:"result"`
	}
	if err := c.get(ctx, "/api/v3/traces/"+url.PathEscape(traceID), nil, &resp); err != nil {
		return nil, err
	}
	t, err := resp.Result.trace()
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", traceID, err)
	}
	if t.ID != traceID {
		return nil, fmt.Errorf("asked for trace %s, got spans of %s", traceID, t.ID)
	}
	return t, nil
}

// pollInterval is how often WaitTrace asks again.
const pollInterval = 250 * time.Millisecond

// WaitTrace polls until exactly one trace matches s and complete accepts
// it, and returns that trace. Spans reach Jaeger in batches, from several
// services, some only when a process exits, so a trace is read again until
// it holds everything the test expects. When ctx ends first, WaitTrace
// returns the last trace it read (nil if none) with an error that says why
// it was not accepted.
func (c *Client) WaitTrace(ctx context.Context, s Search, complete func(*Trace) error) (*Trace, error) {
	var last *Trace
	var why error
	for {
		ids, err := c.FindTraceIDs(ctx, s)
		switch {
		case err != nil:
			why = err
		case len(ids) > 1:
			why = fmt.Errorf("%d traces match %+v, want one: %v", len(ids), s, ids)
		default:
			t, err := c.Trace(ctx, ids[0])
			if err != nil {
				why = err
				break
			}
			last = t
			if why = complete(t); why == nil {
				return t, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("no complete trace for %+v: %w (%v)", s, why, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// Describe returns every trace of every service the query service knows,
// drawn as trees (at most limit traces per service), for failure messages:
// when the trace a test waited for is not there, what is.
func (c *Client) Describe(ctx context.Context, limit int) string {
	services, err := c.Services(ctx)
	if err != nil {
		return "services: " + err.Error()
	}
	if len(services) == 0 {
		return "Jaeger holds no spans of any service"
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, s := range services {
		ids, err := c.FindTraceIDs(ctx, Search{Service: s, Limit: limit})
		if err != nil {
			fmt.Fprintf(&b, "service %s: %v\n", s, err)
			continue
		}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			t, err := c.Trace(ctx, id)
			if err != nil {
				fmt.Fprintf(&b, "trace %s: %v\n", id, err)
				continue
			}
			b.WriteString(t.String())
		}
	}
	return b.String()
}
