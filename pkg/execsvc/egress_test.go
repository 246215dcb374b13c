package execsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
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
	var logs syncBuffer
	cfg := Config{
		Logger:          slog.New(slog.NewJSONHandler(&logs, nil)),
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
	// Each refusal is logged with its session.
	var denied []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var rec struct {
			Msg       string `json:"msg"`
			SessionID string `json:"session_id"`
			Target    string `json:"target"`
			Reason    string `json:"reason"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "egress denied" {
			denied = append(denied, rec.SessionID+" "+rec.Target+" "+rec.Reason)
		}
	}
	want := []string{"wide other.test:80 not_allowed", fmt.Sprintf("narrow localhost:%d not_allowed", port), "narrow other.test:80 not_allowed"}
	if !slices.Equal(denied, want) {
		t.Errorf("logged refusals %q, want %q", denied, want)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
