package jaegertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Jaeger is a running Jaeger v2 that receives OTLP on loopback and keeps
// traces in memory.
type Jaeger struct {
	// OTLPGRPC is the host:port of the OTLP gRPC receiver.
	OTLPGRPC string
	// OTLPHTTP is the host:port of the OTLP HTTP receiver.
	OTLPHTTP string
	// Query reads traces from the query service.
	Query *Client
	// MetricsURL is the Prometheus endpoint that shows the metrics Jaeger
	// received over OTLP.
	MetricsURL string

	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{} // closed when the process has been waited for
	err  error         // Wait's result, set before done is closed
}

// GRPCEndpoint is the OTEL_EXPORTER_OTLP_ENDPOINT for
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
func (j *Jaeger) GRPCEndpoint() string { return "http://" + j.OTLPGRPC }

// HTTPEndpoint is the OTEL_EXPORTER_OTLP_ENDPOINT for
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf.
func (j *Jaeger) HTTPEndpoint() string { return "http://" + j.OTLPHTTP }

// Logs returns what Jaeger wrote so far.
func (j *Jaeger) Logs() string { return j.logs.String() }

// startTimeout bounds Jaeger's start: a few seconds on an idle machine,
// much longer when the machine is busy compiling.
const startTimeout = 2 * time.Minute

// Start runs Jaeger with deploy/jaeger/config.yaml, every listener on
// 127.0.0.1 and a free port, and waits until its receivers and query
// service accept connections. The process is stopped when the test ends;
// its log is shown when the test failed.
func Start(tb testing.TB) *Jaeger {
	tb.Helper()
	bin := Binary(tb)
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	ports, err := freePorts(5)
	if err != nil {
		tb.Fatal(err)
	}
	j := &Jaeger{
		OTLPGRPC:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		OTLPHTTP:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		Query:      NewClient("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))),
		MetricsURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[4])) + "/metrics",
		logs:       &logBuffer{},
		done:       make(chan struct{}),
	}
	cmd := exec.Command(bin, "--config", filepath.Join(root, "deploy", "jaeger", "config.yaml"))
	// Only what the configuration reads, and no OTEL_* of the test's own
	// environment.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + tb.TempDir(),
		"JAEGER_LISTEN_HOST=127.0.0.1",
		"JAEGER_OTLP_GRPC_PORT=" + strconv.Itoa(ports[0]),
		"JAEGER_OTLP_HTTP_PORT=" + strconv.Itoa(ports[1]),
		"JAEGER_QUERY_HTTP_PORT=" + strconv.Itoa(ports[2]),
		"JAEGER_QUERY_GRPC_PORT=" + strconv.Itoa(ports[3]),
		"JAEGER_METRICS_PORT=" + strconv.Itoa(ports[4]),
	}
	cmd.Dir = tb.TempDir()
	cmd.Stdout, cmd.Stderr = j.logs, j.logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start Jaeger: %v", err)
	}
	j.cmd = cmd
	go func() {
		j.err = cmd.Wait()
		close(j.done)
	}()
	tb.Cleanup(func() {
		if err := j.stop(); err != nil {
			tb.Errorf("stop Jaeger: %v", err)
		}
		if tb.Failed() {
			tb.Logf("Jaeger log:\n%s", tail(j.Logs(), 8000))
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := j.waitReady(ctx); err != nil {
		tb.Fatalf("Jaeger did not start: %v\nlog:\n%s", err, tail(j.Logs(), 8000))
	}
	return j
}

// waitReady polls until both receivers accept TCP connections and the
// query service answers, or the process exits, or ctx ends.
func (j *Jaeger) waitReady(ctx context.Context) error {
	var last error
	for {
		last = j.ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-j.done:
			return fmt.Errorf("Jaeger exited: %v", j.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", startTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready reports why Jaeger is not serving yet, or nil.
func (j *Jaeger) ready(ctx context.Context) error {
	for _, addr := range []string{j.OTLPGRPC, j.OTLPHTTP} {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		c.Close()
	}
	_, err := j.Query.Services(ctx)
	return err
}

// stopGrace is how long Jaeger may take to exit after SIGTERM.
const stopGrace = 15 * time.Second

// stop ends the process: SIGTERM, then SIGKILL if it is still there after
// stopGrace. It returns an error only when the process could not be ended.
func (j *Jaeger) stop() error {
	select {
	case <-j.done:
		return nil
	default:
	}
	if err := j.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-j.done:
		return nil
	case <-time.After(stopGrace):
	}
	if err := j.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-j.done
	return fmt.Errorf("Jaeger (pid %d) ignored SIGTERM for %v and was killed", j.cmd.Process.Pid, stopGrace)
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1. All
// are held open together so that none is returned twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1, for
// a test's other listeners.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports, err := freePorts(n)
	if err != nil {
		tb.Fatal(err)
	}
	return ports
}

// logBuffer collects a child's output; it may be read while the child
// writes.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// maxLog bounds what a logBuffer keeps: the first bytes, which hold the
// start-up, are what explains most failures.
const maxLog = 1 << 20

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxLog - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// httpClient is the query client's default: no proxy from the environment,
// since the query service is always reached directly, and no keep-alive, so
// that no idle connection (and its goroutines) outlives a test.
var httpClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	Timeout:   30 * time.Second,
}
