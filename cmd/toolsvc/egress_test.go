package main_test

import (
	"bytes"
	"encoding/json"
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

	"github.com/toolwire/toolwire/pkg/egress/egresstest"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// TestCallNetworkAllowlist runs Bash curl through the real binary with
// --network allowlist, against servers in a network namespace the test
// makes: a registry at a public-looking address, over HTTP and HTTPS, and
// an internal service at a private one. toolsvc runs in a mount namespace
// whose /etc/hosts names them, so its proxy resolves the names as it would
// from DNS.
func TestCallNetworkAllowlist(t *testing.T) {
	h := egresstest.NewHost(t)
	for _, prog := range []string{"curl", "unshare"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("needs %s", prog)
		}
	}
	var internalHits atomic.Int32
	h.Serve(t, h.Private, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		io.WriteString(w, "internal secret")
	}))
	registry := http.NewServeMux()
	registry.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "registry ok") })
	registry.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://internal.toolwire.test/secret", http.StatusFound)
	})
	h.Serve(t, h.Public, 80, registry)
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "registry tls ok") }))
	tlsSrv.Listener.Close()
	tlsSrv.Listener = h.Listen(t, h.Public, 443)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte(fmt.Sprintf("127.0.0.1 localhost\n::1 localhost\n%s registry.toolwire.test other.toolwire.test\n%s internal.toolwire.test\n",
		h.Public, h.Private)), 0o644)

	uses := []string{
		`curl -sS http://registry.toolwire.test/`,
		`curl -sS -k https://registry.toolwire.test/`,
		`curl -fsS -L http://registry.toolwire.test/moved`,
		`curl -fsS http://other.toolwire.test/`,
		`curl -sS -k https://registry.toolwire.test:8443/`,
		fmt.Sprintf(`exec 3<>/dev/tcp/%s/80`, h.Public),
		// Around the proxy: no DNS in the session's namespace.
		`curl -sS --noproxy '*' http://pypi.toolwire.test/`,
	}
	// Each call an assistant message of its own: a failed one must not
	// stop the others as its siblings.
	var in bytes.Buffer
	for i, cmd := range uses {
		b, _ := json.Marshal([]any{map[string]any{"type": "tool_use", "id": fmt.Sprintf("t%d", i), "name": "Bash", "input": map[string]string{"command": cmd}}})
		in.Write(append(b, '\n'))
	}
	call := fmt.Sprintf("mount --bind %s /etc/hosts && exec %s call --embedded --root %s --network allowlist "+
		"--allowed-domains registry.toolwire.test:80,registry.toolwire.test:443,internal.toolwire.test",
		hosts, toolsvcBin, sandboxtest.Dir(t))
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", call)
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolsvc call: %v\nstderr: %s", err, stderr.String())
	}
	var rs []toolResult
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil || len(rs) != len(uses) {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	allowed := " The session may reach only registry.toolwire.test:80, registry.toolwire.test:443, internal.toolwire.test."
	want := []struct{ prefix, note string }{
		{"registry ok", ""},
		{"registry tls ok", ""},
		{"Exit code 22\ncurl: (22) The requested URL returned error: 403",
			fmt.Sprintf("its egress proxy refused internal.toolwire.test:80 (internal.toolwire.test resolves to %s, a private address (10.0.0.0/8), which the policy does not allow).", h.Private) + allowed},
		{"Exit code 22\ncurl: (22) The requested URL returned error: 403",
			"its egress proxy refused other.toolwire.test:80 (other.toolwire.test is not an allowed domain)." + allowed},
		{"Exit code 56\ncurl: (56) CONNECT tunnel failed, response 403",
			"its egress proxy refused registry.toolwire.test:8443 (port 8443 is not allowed for registry.toolwire.test (allowed: registry.toolwire.test:80, registry.toolwire.test:443))." + allowed},
		{"Exit code 1\n/bin/bash: connect: Network is unreachable",
			"programs reach the network only through the HTTP proxy that HTTPS_PROXY and HTTP_PROXY name"},
		{"Exit code 6\ncurl: (6) Could not resolve host: pypi.toolwire.test",
			"programs reach the network only through the HTTP proxy that HTTPS_PROXY and HTTP_PROXY name"},
	}
	for i, w := range want {
		content, _ := rs[i].Content.(string)
		if !strings.HasPrefix(content, w.prefix) || !strings.Contains(content, w.note) {
			t.Errorf("%s:\n%s\nwant it to start %q and say %q", uses[i], content, w.prefix, w.note)
		}
		if w.note == "" && strings.Contains(content, "Note:") {
			t.Errorf("%s: a note on success: %q", uses[i], content)
		}
	}
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
}
