package shell_test

import (
	"path/filepath"
	"strings"
	"testing"

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
