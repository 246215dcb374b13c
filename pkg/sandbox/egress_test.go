package sandbox_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox"
)

// TestEgressListener: with network "allowlist" processes reach one thing
// beyond their own loopback, the socket the runner hands the service,
// which their proxy variables name; the host's loopback and every other
// address stay out of reach.
func TestEgressListener(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	r := newRunner(t, sandbox.Config{Network: sandbox.NetworkAllowlist})
	ln := r.EgressListener()
	if ln == nil {
		t.Fatal("no egress listener")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "proxy here")
			c.Close()
		}
	})
	port := ln.Addr().(*net.TCPAddr).Port
	if got := r.Network(); got != sandbox.NetworkAllowlist {
		t.Errorf("Network() = %q", got)
	}
	enforced := r.Enforced()
	if !slices.Contains(enforced, "egress_allowlist") || slices.Contains(enforced, "network_isolation") {
		t.Errorf("Enforced() = %q", enforced)
	}

	out, code := run(t, r, `echo "$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy $NO_PROXY"; exec 3<>/dev/tcp/127.0.0.1/${HTTP_PROXY##*:} && cat <&3`)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	want := fmt.Sprintf("%s %s %s %s localhost,127.0.0.1,::1\nproxy here\n", url, url, url, url)
	if out != want || code != 0 {
		t.Errorf("through the proxy socket: %q exit %d, want %q", out, code, want)
	}
	out, code = run(t, r, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", host.Addr().(*net.TCPAddr).Port))
	if !strings.Contains(out, "Connection refused") || code != 1 {
		t.Errorf("the host's loopback: %q exit %d, want it refused", out, code)
	}
	// 192.0.2.1 is TEST-NET-1: with a route, the connect would wait; with
	// none it fails at once.
	out, code = run(t, r, "exec 3<>/dev/tcp/192.0.2.1/80")
	if !strings.Contains(out, "Network is unreachable") || code != 1 {
		t.Errorf("another address: %q exit %d, want no route", out, code)
	}

	r.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
}

// TestNoEgressListener: the other network modes have no proxy socket and
// set no proxy variables of their own.
func TestNoEgressListener(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "")
	for _, network := range []string{sandbox.NetworkNone, sandbox.NetworkHost} {
		r := newRunner(t, sandbox.Config{Network: network})
		if r.EgressListener() != nil {
			t.Errorf("network %s: an egress listener", network)
		}
		if out, _ := run(t, r, `echo "[$HTTPS_PROXY]"`); out != "[]\n" {
			t.Errorf("network %s: HTTPS_PROXY %q", network, out)
		}
	}
}
