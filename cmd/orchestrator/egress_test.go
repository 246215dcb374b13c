package main_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// TestHeadlessNetworkAllowlist: -p --network allowlist gives Bash the
// allowed domains of the flags and of the settings file (the file's list
// adds to the flags', it does not narrow them), through the egress proxy,
// and nothing else.
func TestHeadlessNetworkAllowlist(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from the host") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	settings := filepath.Join(t.TempDir(), "settings.json")
	writeFile(t, settings, `{"sandbox": {"network": {"allowedDomains": ["pypi.org:443"]}}}`, 0o644)
	fake := fakeapi.New(t, turns(
		// --noproxy '': localhost goes through the proxy too.
		fakeapi.ToolUse("allowed", "Bash", map[string]any{"command": fmt.Sprintf("curl -sS --noproxy '' http://localhost:%d/", port)}),
		fakeapi.ToolUse("other", "Bash", map[string]any{"command": "curl -fsS http://other.test/"}),
	)...)
	r := runAs(t, fake, devHome(t), nil, "-p", "network?", "--root", t.TempDir(), "--sessions-dir", t.TempDir(),
		"--permission-mode", "bypassPermissions", "--settings", settings,
		"--network", "allowlist", "--allowed-domains", "localhost", "--allowed-addresses", "127.0.0.0/8,::1")
	checkResults(t, fake, r, map[string]wantResult{
		"allowed": {"from the host", false},
		"other":   {"Exit code 22\ncurl: (22) The requested URL returned error: 403", true},
	})
	if s := resultText(toolResults(fake)["other"]); !strings.HasSuffix(s, "its egress proxy refused other.test:80 (other.test is not an allowed domain). The session may reach only localhost, pypi.org:443. The user can allow more with --allowed-domains, or sandbox.network.allowedDomains in the settings.") {
		t.Errorf("refused: %q", s)
	}

	r = runAs(t, fakeapi.New(t), devHome(t), nil, "-p", "x", "--allowed-domains", "localhost")
	if r.code != 2 || !strings.Contains(r.stderr, `--allowed-domains applies to --network allowlist, not "host"`) {
		t.Errorf("--allowed-domains without allowlist: exit %d, stderr %q", r.code, r.stderr)
	}
}
