// Command fakemodel serves the scripted conversation of
// test/tracing/spancontract as a fake Anthropic Messages API, for the
// compose test: it runs in a container on the deployment's private network
// and the orchestrator's ANTHROPIC_BASE_URL points at it.
//
// The fake itself (pkg/model/fakeapi) listens on loopback only, so
// fakemodel puts a reverse proxy on --listen in front of it; server-sent
// events pass through unbuffered. Each request is logged to stderr as one
// JSON line with the tool results it carries, which the test reads with
// `docker compose logs`. With --repeat N the script is served N times in a
// row, for N conversations; a request beyond that gets an HTTP 400.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/test/tracing/spancontract"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve the fake API on")
	repeat := flag.Int("repeat", 1, "how many times to serve the script (one conversation each)")
	flag.Parse()
	if err := run(*listen, *repeat); err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
}

// requestLog is the line logged for each request.
type requestLog struct {
	Request     int             `json:"request"`
	Model       string          `json:"model"`
	Messages    int             `json:"messages"`
	ToolResults map[string]bool `json:"tool_results"` // tool_use_id -> is_error
	Scripted    bool            `json:"scripted"`
}

func run(listen string, repeat int) error {
	fake, err := fakeapi.Start()
	if err != nil {
		return err
	}
	defer fake.Close()
	enc := json.NewEncoder(os.Stderr)
	logged := func(reply fakeapi.Reply, scripted bool) fakeapi.Responder {
		return func(r *fakeapi.Request) fakeapi.Reply {
			l := requestLog{Request: r.Index, Model: r.Body.Model, Messages: len(r.Body.Messages), ToolResults: map[string]bool{}, Scripted: scripted}
			for _, m := range r.Body.Messages {
				for _, b := range m.Content {
					if b.Type == "tool_result" {
						l.ToolResults[b.ToolUseID] = b.IsError != nil && *b.IsError
					}
				}
			}
			_ = enc.Encode(l)
			return reply
		}
	}
	for range repeat {
		for _, reply := range spancontract.Script() {
			fake.PushFunc(logged(reply, true))
		}
	}
	fake.SetFallback(logged(fakeapi.Reply{
		Status: http.StatusBadRequest, ErrorType: "invalid_request_error", ErrorMessage: "fakemodel: the script has ended",
	}, false))

	handler, err := newProxy(fake.URL)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ListenAndServe() }()
	fmt.Fprintf(os.Stderr, "fakemodel: serving %d scripted replies %d times on %s\n", len(spancontract.Script()), repeat, listen)
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// newProxy returns a handler that passes every request on to target and
// streams the answer back as it comes.
func newProxy(target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	// The fake answers as soon as it has read a request, while the proxy's
	// transport may still read the inbound body once more, to see that it
	// ends where its length said. An HTTP/1 handler's body is closed once
	// its answer starts (golang/go#40747): that last read would fail, and
	// the transport would drop the connection and cut the answer midway.
	// Full duplex keeps the body open while the answer streams.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "fakemodel: "+err.Error(), http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}), nil
}
