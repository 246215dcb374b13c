// Package otlptest is a small OTLP receiver for tests: it accepts traces
// and metrics over gRPC or over HTTP (protobuf) on loopback and keeps what
// it received, so a test can check what a real exporter really sent.
package otlptest

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	collmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps the spans and metrics exported to it.
type Receiver struct {
	// Endpoint is the URL to put in OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string

	mu      sync.Mutex // guards the fields below
	spans   []Span
	metrics []*metricpb.ResourceMetrics
}

// Span is a received span with the attributes of its resource.
type Span struct {
	*tracepb.Span
	Resource map[string]string
}

// Attr returns the string form of the span's attribute key ("" if absent).
func (s Span) Attr(key string) string { return attrs(s.GetAttributes())[key] }

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// MetricNames returns the names of the metrics received so far, each once.
func (r *Receiver) MetricNames() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]bool{}
	for _, rm := range r.metrics {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				names[m.GetName()] = true
			}
		}
	}
	return names
}

func (r *Receiver) addTraces(req *colltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: sp, Resource: res})
			}
		}
	}
}

func (r *Receiver) addMetrics(req *collmetricpb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.metrics = append(r.metrics, req.GetResourceMetrics()...)
}

// attrs flattens OTLP attributes to strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueString(kv.GetValue())
	}
	return m
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return prototext.Format(v)
}

// StartGRPC serves the OTLP trace and metrics services over gRPC on a
// loopback port until the test ends.
func StartGRPC(t testing.TB) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Endpoint: "http://" + lis.Addr().String()}
	srv := grpc.NewServer()
	colltracepb.RegisterTraceServiceServer(srv, traceService{r: r})
	collmetricpb.RegisterMetricsServiceServer(srv, metricsService{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return r
}

type traceService struct {
	colltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, req *colltracepb.ExportTraceServiceRequest) (*colltracepb.ExportTraceServiceResponse, error) {
	s.r.addTraces(req)
	return &colltracepb.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	collmetricpb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricsService) Export(_ context.Context, req *collmetricpb.ExportMetricsServiceRequest) (*collmetricpb.ExportMetricsServiceResponse, error) {
	s.r.addMetrics(req)
	return &collmetricpb.ExportMetricsServiceResponse{}, nil
}

// StartHTTP serves OTLP/HTTP with protobuf bodies (/v1/traces and
// /v1/metrics) on a loopback port until the test ends.
func StartHTTP(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		var m colltracepb.ExportTraceServiceRequest
		if !readProto(w, req, &m) {
			return
		}
		r.addTraces(&m)
		writeProto(w, &colltracepb.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		var m collmetricpb.ExportMetricsServiceRequest
		if !readProto(w, req, &m) {
			return
		}
		r.addMetrics(&m)
		writeProto(w, &collmetricpb.ExportMetricsServiceResponse{})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

func readProto(w http.ResponseWriter, req *http.Request, m proto.Message) bool {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}
