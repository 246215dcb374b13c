package main_test

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/egress/egresstest"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// TestCallWebFetchRebinding runs WebFetch through `toolsvc call` with the
// host's network, against HTTPS servers in a network namespace the test
// makes: example.com names the public-looking address until its page has
// answered, then a private one (the test rewrites /etc/hosts, bound into
// toolsvc's mount namespace, in between). The same-host redirect that
// follows is a new connection whose lookup gives the private address: it
// is refused, and the private server never sees a request.
func TestCallWebFetchRebinding(t *testing.T) {
	h := egresstest.NewHost(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	entry := func(addr fmt.Stringer) []byte {
		return fmt.Appendf(nil, "127.0.0.1 localhost\n::1 localhost\n%s example.com\n", addr)
	}
	if err := os.WriteFile(hosts, entry(h.Public), 0o644); err != nil {
		t.Fatal(err)
	}
	var privateHits, startHits atomic.Int32
	serveTLS := func(addr fmt.Stringer, handler http.HandlerFunc) *httptest.Server {
		srv := httptest.NewUnstartedServer(handler)
		srv.Listener.Close()
		ip := h.Public
		if addr.String() == h.Private.String() {
			ip = h.Private
		}
		srv.Listener = h.Listen(t, ip, 443)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	public := serveTLS(h.Public, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/start" {
			io.WriteString(w, "<p>public page</p>")
			return
		}
		startHits.Add(1)
		// Rebind the name, then wait out the resolver's cache of
		// /etc/hosts (5 seconds in Go's) before sending the client on.
		if err := os.WriteFile(hosts, entry(h.Private), 0o644); err != nil {
			t.Error(err)
		}
		time.Sleep(6 * time.Second)
		http.Redirect(w, r, "/next", http.StatusFound)
	})
	serveTLS(h.Private, func(w http.ResponseWriter, r *http.Request) {
		privateHits.Add(1)
		io.WriteString(w, "internal secret")
	})
	certFile := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: public.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}

	in, _ := json.Marshal([]any{map[string]any{"type": "tool_use", "id": "fetch", "name": "WebFetch",
		"input": map[string]string{"url": "http://example.com/start", "prompt": "What does it say?"}}})
	call := fmt.Sprintf("mount --bind %s /etc/hosts && exec %s call --embedded --root %s --network host", hosts, toolsvcBin, sandboxtest.Dir(t))
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", call)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+certFile)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolsvc call: %v\nstderr: %s", err, stderr.String())
	}
	var rs []toolResult
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil || len(rs) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	content, _ := rs[0].Content.(string)
	want := fmt.Sprintf("<tool_use_error>WebFetch refused https://example.com/start: egress policy refused example.com:443: example.com resolves to %s, a private address (10.0.0.0/8), which the policy does not allow.", h.Private)
	if rs[0].IsError == nil || !*rs[0].IsError || !strings.HasPrefix(content, want) {
		t.Errorf("result %q\nwant it to start %q", content, want)
	}
	if n := startHits.Load(); n != 1 {
		t.Errorf("the public page was asked for %d times, want once (the name's first answer is public)", n)
	}
	if n := privateHits.Load(); n != 0 {
		t.Errorf("the private server got %d requests", n)
	}
}
