package shell_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/tool"
)

// TestNoNetworkNote: a command that fails to connect in a sandbox without
// network gets a note saying so after its output; other failures, and
// failures with network, do not.
func TestNoNetworkNote(t *testing.T) {
	none := newSession(t, tool.Limits{}) // the sandbox's default: network none
	host := newSession(t, tool.Limits{})
	r, err := sandbox.NewRunner(sandbox.Config{Network: sandbox.NetworkHost}, host.ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	host.env.Procs = r

	// 192.0.2.1 is TEST-NET-1: never routed, so no packet leaves.
	connect := "exec 3<>/dev/tcp/192.0.2.1/9"
	cases := []struct {
		name    string
		s       *session
		command string
		prefix  string
		note    bool
	}{
		{"connect fails without network", none, connect, "Exit code 1\n/bin/bash: connect: Network is unreachable", true},
		{"name lookup fails without network", none, "echo 'dial tcp: lookup proxy.golang.org on 127.0.0.53:53: connection refused' >&2; exit 1", "Exit code 1\ndial tcp", true},
		{"other failure without network", none, "echo tests failed; exit 2", "Exit code 2\ntests failed", false},
		{"success without network", none, "echo Network is unreachable", "Network is unreachable", false},
		{"same output with network", host, "echo Network is unreachable; exit 1", "Exit code 1\nNetwork is unreachable", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.s.bash(t, c.command).TextContent()
			if !strings.HasPrefix(got, c.prefix) {
				t.Errorf("result %q, want it to start %q", got, c.prefix)
			}
			if has := strings.HasSuffix(got, "\nNote: this command ran in a sandbox without network access (loopback only), which is likely why it failed. The user can allow network access with --network host."); has != c.note {
				t.Errorf("result %q: note %v, want %v", got, has, c.note)
			}
		})
	}
}

// TestAllowlistNote: with an allowlist, a failed command is told which
// connections the egress proxy refused and why, or, when the proxy saw
// nothing, that only the proxy leads out; other failures get no note.
func TestAllowlistNote(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	s := newSession(t, tool.Limits{})
	r, err := sandbox.NewRunner(sandbox.Config{Network: sandbox.NetworkAllowlist}, s.ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	policy, err := egress.NewPolicy([]string{"pypi.org:443"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := egress.New(egress.Config{Policy: policy})
	go proxy.Serve(r.EgressListener())
	t.Cleanup(proxy.Close)
	s.env.Procs, s.env.Egress = r, proxy

	const reach = " The session may reach only pypi.org:443. The user can allow more with --allowed-domains, or sandbox.network.allowedDomains in the settings."
	cases := []struct {
		name, command, prefix, note string
	}{
		{"plain HTTP refused", "curl -fsS http://other.test/simple/",
			"Exit code 22\ncurl: (22) The requested URL returned error: 403",
			"Note: this command ran in a sandbox whose network is an allowlist, and its egress proxy refused other.test:80 (other.test is not an allowed domain)." + reach},
		{"CONNECT refused", "curl -sS https://other.test/",
			"Exit code 56\ncurl: (56) CONNECT tunnel failed, response 403",
			"Note: this command ran in a sandbox whose network is an allowlist, and its egress proxy refused other.test:443 (other.test is not an allowed domain)." + reach},
		{"port refused", "curl -sS https://pypi.org:8443/",
			"Exit code 56\ncurl: (56) CONNECT tunnel failed, response 403",
			"Note: this command ran in a sandbox whose network is an allowlist, and its egress proxy refused pypi.org:8443 (port 8443 is not allowed for pypi.org (allowed: pypi.org:443))." + reach},
		{"around the proxy", "exec 3<>/dev/tcp/192.0.2.1/9",
			"Exit code 1\n/bin/bash: connect: Network is unreachable",
			"Note: this command ran in a sandbox whose network is an allowlist: programs reach the network only through the HTTP proxy that HTTPS_PROXY and HTTP_PROXY name (plain TCP, UDP and their own DNS lookups fail), which is likely why it failed." + reach},
		{"other failure", "echo tests failed; exit 2", "Exit code 2\ntests failed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := s.bash(t, c.command).TextContent()
			if !strings.HasPrefix(got, c.prefix) {
				t.Errorf("result %q, want it to start %q", got, c.prefix)
			}
			if c.note == "" {
				if strings.Contains(got, "Note:") {
					t.Errorf("result %q has a note", got)
				}
			} else if !strings.HasSuffix(got, "\n"+c.note) {
				t.Errorf("result %q\nwant it to end with %q", got, c.note)
			}
		})
	}
}
