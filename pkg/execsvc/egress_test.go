package execsvc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/settings"
)

// TestSessionEgress: a session of an allowlist executor reaches what the
// operator's policy and its own settings both allow, through the proxy its
// environment names, and nothing else; Hello says what it may reach.
func TestSessionEgress(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	// A server on the host's loopback: the session's own loopback is
	// another, so only the proxy reaches this one, and only because the
	// operator lists the range.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host server") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	operator, err := egress.NewPolicy([]string{"localhost"}, nil, []string{"127.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Root:            sandboxtest.Dir(t),
		TempRoot:        sandboxtest.Dir(t),
		Sandbox:         sandbox.Config{Network: sandbox.NetworkAllowlist},
		Egress:          operator,
		SandboxSettings: settings.Sandbox{Network: settings.Network{AllowedDomains: []string{"*.example.test"}, DeniedDomains: []string{"bad.example.test"}}},
	}
	factory := factoryOf(t, cfg, nil)
	open := func(id string, n settings.Network) (string, executor.SandboxInfo) {
		env, info, err := factory(context.Background(), executor.EnvRequest{SessionID: id, Network: n})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(env.Close)
		if env.Egress == nil {
			t.Fatal("no egress proxy in the session's environment")
		}
		// --noproxy '': curl would go straight to "localhost", its own
		// loopback, by NO_PROXY.
		return bash(t, env, fmt.Sprintf("curl -sS --noproxy '' http://localhost:%d/; echo; curl -sS --noproxy '' http://other.test/", port)), info
	}

	out, info := open("wide", settings.Network{})
	if info.Network != sandbox.NetworkAllowlist || !slices.Equal(info.AllowedDomains, []string{"localhost", "*.example.test"}) ||
		!slices.Contains(info.Enforced, "egress_allowlist") {
		t.Errorf("Hello: network %q, allowed %q, enforced %q", info.Network, info.AllowedDomains, info.Enforced)
	}
	if !strings.HasPrefix(out, "host server\ntoolwire egress proxy: egress policy refused other.test:80: other.test is not an allowed domain.") {
		t.Errorf("operator's policy: %q", out)
	}

	// The session's own list narrows: localhost is no longer among them,
	// and what it adds beyond the operator's list it does not get.
	out, info = open("narrow", settings.Network{AllowedDomains: []string{"api.example.test", "other.test"}})
	if !slices.Equal(info.AllowedDomains, []string{"api.example.test"}) {
		t.Errorf("narrowed Hello: allowed %q", info.AllowedDomains)
	}
	if !strings.HasPrefix(out, fmt.Sprintf("toolwire egress proxy: egress policy refused localhost:%d: localhost is not an allowed domain.", port)) ||
		!strings.Contains(out, "other.test is not an allowed domain") {
		t.Errorf("narrowed session: %q", out)
	}
}
