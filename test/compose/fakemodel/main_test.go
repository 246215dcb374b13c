package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/test/tracing/spancontract"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProxyKeepsBodyOpen checks what keeps the proxy's answers whole: the
// request body stays readable after the answer has begun. The backend here
// starts its answer before it reads the body, so the proxy's transport is
// still sending the body when the answer comes back; an HTTP/1 proxy
// without full duplex closes the body at that moment, the transport drops
// the backend's connection, and the answer is cut. (The fake API reads the
// body first, and there the same close hits only the transport's last read,
// when the scheduler lets it: a rare stream cut in the compose test.)
func TestProxyKeepsBodyOpen(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Errorf("backend: %v", err)
			return
		}
		w.Header().Set("content-type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if err := rc.Flush(); err != nil {
			t.Errorf("backend: %v", err)
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "data: read %d bytes, %v\n\n", n, err)
	}))
	defer backend.Close()
	handler, err := newProxy(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(handler)
	defer proxy.Close()
	client := proxy.Client()
	defer client.CloseIdleConnections()

	const size = 4 << 20 // well beyond what a server drains on its own
	resp, err := client.Post(proxy.URL, "application/json", bytes.NewReader(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("data: read %d bytes, <nil>\n\n", size); err != nil || string(got) != want {
		t.Fatalf("the answer through the proxy: %q, %v; want %q", got, err, want)
	}
}

// TestProxyStreamsWhole sends the conversation's requests through the proxy,
// from a few clients at once, and checks that every answer arrives whole,
// ending with message_stop.
func TestProxyStreamsWhole(t *testing.T) {
	const (
		clients = 4
		each    = 60 // requests per client, a multiple of the script's length
	)
	fake, err := fakeapi.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	for range clients * each / len(spancontract.Script()) {
		fake.Push(spancontract.Script()...)
	}
	handler, err := newProxy(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	// A body of the size a conversation's requests have, over a socket
	// write: the transport sends it straight on.
	body := []byte(fmt.Sprintf(`{"model":%q,"max_tokens":1024,"stream":true,"messages":[{"role":"user","content":%q}]}`,
		spancontract.Model, strings.Repeat("notes ", 8000)))
	want := []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	var g errgroup.Group
	for c := range clients {
		g.Go(func() error {
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for i := range each {
				resp, err := client.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader(body))
				if err != nil {
					return fmt.Errorf("client %d, request %d: %w", c, i, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return fmt.Errorf("client %d, request %d: the answer broke off after %d bytes: %w", c, i, len(got), err)
				}
				if resp.StatusCode != http.StatusOK || !bytes.HasSuffix(got, want) {
					return fmt.Errorf("client %d, request %d: status %d, the answer ends %q", c, i, resp.StatusCode, got[max(0, len(got)-80):])
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if errs := fake.Errors(); len(errs) > 0 {
		t.Fatalf("the fake API failed: %v", errs)
	}
}
