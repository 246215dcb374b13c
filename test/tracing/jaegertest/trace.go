package jaegertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trace is one trace as Jaeger stored it.
type Trace struct {
	// ID is the trace id in hex.
	ID string
	// Spans are every span of the trace, in start order.
	Spans []*Span
}

// Span is one span with its resource.
type Span struct {
	// TraceID, SpanID and ParentID are hex ids; ParentID is empty for a root.
	TraceID, SpanID, ParentID string
	// Name is the span name.
	Name string
	// Kind is OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer,
	// 5 consumer.
	Kind int
	// Start and End are the span's times.
	Start, End time.Time
	// Attrs are the span's attributes: string, bool, int64, float64, or
	// []any of those for arrays.
	Attrs map[string]any
	// Resource holds the attributes of the resource that sent the span,
	// service.name among them.
	Resource map[string]any
	// Scope is the instrumentation scope's name.
	Scope string
	// StatusCode is OTLP's status code: 0 unset, 1 ok, 2 error.
	StatusCode int
	// StatusMessage is the status description.
	StatusMessage string
}

// Service returns the span's service.name.
func (s *Span) Service() string {
	v, _ := s.Resource["service.name"].(string)
	return v
}

// Str returns a string attribute.
func (s *Span) Str(key string) (string, bool) {
	v, ok := s.Attrs[key].(string)
	return v, ok
}

// Int returns an integer attribute.
func (s *Span) Int(key string) (int64, bool) {
	v, ok := s.Attrs[key].(int64)
	return v, ok
}

// String describes the span in one line: service, name, ids and attributes.
func (s *Span) String() string {
	keys := make([]string, 0, len(s.Attrs))
	for k := range s.Attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q span=%s", s.Service(), s.Name, s.SpanID)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, s.Attrs[k])
	}
	if s.StatusCode == 2 {
		fmt.Fprintf(&b, " status=error(%s)", s.StatusMessage)
	}
	return b.String()
}

// Find returns the spans of service (any when empty) named name, in start
// order.
func (t *Trace) Find(service, name string) []*Span {
	var out []*Span
	for _, s := range t.Spans {
		if s.Name == name && (service == "" || s.Service() == service) {
			out = append(out, s)
		}
	}
	return out
}

// Span returns the span with the given id, or nil.
func (t *Trace) Span(id string) *Span {
	for _, s := range t.Spans {
		if s.SpanID == id {
			return s
		}
	}
	return nil
}

// Children returns the spans whose parent is p, in start order.
func (t *Trace) Children(p *Span) []*Span {
	var out []*Span
	for _, s := range t.Spans {
		if s.ParentID == p.SpanID {
			out = append(out, s)
		}
	}
	return out
}

// String draws the trace as an indented tree, for failure messages. Spans
// whose parent is not in the trace are drawn as roots.
func (t *Trace) String() string {
	if t == nil {
		return "(no trace)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s, %d spans:\n", t.ID, len(t.Spans))
	var draw func(s *Span, depth int)
	draw = func(s *Span, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth+1), s)
		for _, c := range t.Children(s) {
			draw(c, depth+1)
		}
	}
	for _, s := range t.Spans {
		if s.ParentID == "" || t.Span(s.ParentID) == nil {
			draw(s, 0)
		}
	}
	return b.String()
}

// The OTLP JSON that API v3 returns, as far as Trace needs it.
type (
	otlpTraces struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []otlpKeyValue `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Scope struct {
					Name string `json:"name"`
				} `json:"scope"`
				Spans []otlpSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	otlpSpan struct {
		TraceID      string          `json:"traceId"`
		SpanID       string          `json:"spanId"`
		ParentSpanID string          `json:"parentSpanId"`
		Name         string          `json:"name"`
		Kind         json.RawMessage `json:"kind"`
		Start        json.RawMessage `json:"startTimeUnixNano"`
		End          json.RawMessage `json:"endTimeUnixNano"`
		Attributes   []otlpKeyValue  `json:"attributes"`
		Status       struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"status"`
	}
	otlpKeyValue struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		StringValue *string         `json:"stringValue"`
		BoolValue   *bool           `json:"boolValue"`
		IntValue    json.RawMessage `json:"intValue"`
		DoubleValue *float64        `json:"doubleValue"`
		ArrayValue  *struct {
			Values []otlpValue `json:"values"`
		} `json:"arrayValue"`
	}
)

// spanKinds maps OTLP's enum names to numbers, for encoders that write
// names.
var spanKinds = map[string]int{
	"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
	"SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
}

// statusCodes maps OTLP's status names to numbers.
var statusCodes = map[string]int{"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

// trace flattens the OTLP structure into a Trace.
func (o otlpTraces) trace() (*Trace, error) {
	t := &Trace{}
	for _, rs := range o.ResourceSpans {
		res, err := attrMap(rs.Resource.Attributes)
		if err != nil {
			return nil, err
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s, err := sp.span(res, ss.Scope.Name)
				if err != nil {
					return nil, fmt.Errorf("span %s %q: %w", sp.SpanID, sp.Name, err)
				}
				if t.ID == "" {
					t.ID = s.TraceID
				} else if s.TraceID != t.ID {
					return nil, fmt.Errorf("spans of two traces, %s and %s", t.ID, s.TraceID)
				}
				t.Spans = append(t.Spans, s)
			}
		}
	}
	if len(t.Spans) == 0 {
		return nil, errors.New("no spans")
	}
	slices.SortStableFunc(t.Spans, func(a, b *Span) int { return a.Start.Compare(b.Start) })
	return t, nil
}

func (o otlpSpan) span(resource map[string]any, scope string) (*Span, error) {
	attrs, err := attrMap(o.Attributes)
	if err != nil {
		return nil, err
	}
	kind, err := enumOrInt(o.Kind, spanKinds)
	if err != nil {
		return nil, fmt.Errorf("kind: %w", err)
	}
	code, err := enumOrInt(o.Status.Code, statusCodes)
	if err != nil {
		return nil, fmt.Errorf("status code: %w", err)
	}
	start, err := unixNano(o.Start)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	end, err := unixNano(o.End)
	if err != nil {
		return nil, fmt.Errorf("end: %w", err)
	}
	return &Span{
		TraceID: strings.ToLower(o.TraceID), SpanID: strings.ToLower(o.SpanID), ParentID: strings.ToLower(o.ParentSpanID),
		Name: o.Name, Kind: kind, Start: start, End: end,
		Attrs: attrs, Resource: resource, Scope: scope,
		StatusCode: code, StatusMessage: o.Status.Message,
	}, nil
}

func attrMap(kvs []otlpKeyValue) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.value()
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", kv.Key, err)
		}
		m[kv.Key] = v
	}
	return m, nil
}

func (v otlpValue) value() (any, error) {
	switch {
	case v.StringValue != nil:
		return *v.StringValue, nil
	case v.BoolValue != nil:
		return *v.BoolValue, nil
	case v.IntValue != nil:
		return jsonInt(v.IntValue)
	case v.DoubleValue != nil:
		return *v.DoubleValue, nil
	case v.ArrayValue != nil:
		out := make([]any, 0, len(v.ArrayValue.Values))
		for _, e := range v.ArrayValue.Values {
			x, err := e.value()
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	// Empty values, maps and bytes are not used by toolwire's spans.
	return nil, nil
}

// jsonInt reads an int64 that proto's JSON form writes as a string (or a
// number).
func jsonInt(raw json.RawMessage) (int64, error) {
	s := strings.Trim(string(raw), `"`)
	return strconv.ParseInt(s, 10, 64)
}

// enumOrInt reads an enum written as a number or by name; absent is 0.
func enumOrInt(raw json.RawMessage, names map[string]int) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if n, ok := names[name]; ok {
			return n, nil
		}
		return 0, fmt.Errorf("unknown value %q", name)
	}
	var n int
	err := json.Unmarshal(raw, &n)
	return n, err
}

// unixNano reads a timestamp in nanoseconds since the epoch.
func unixNano(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 {
		return time.Time{}, nil
	}
	n, err := jsonInt(raw)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, n), nil
}
