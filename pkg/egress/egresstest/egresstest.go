// Package egresstest gives tests hosts to reach through the egress proxy:
// network namespaces linked to the test's own by a veth pair, each with a
// public-looking address and a private one, and listeners inside them. It
// needs root and the ip command; tests skip without them. Everything it
// makes is removed when the test ends.
package egresstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Host is a network namespace with two addresses, reachable from the
// test's namespace.
type Host struct {
	// NS is the namespace's name (ip netns).
	NS string
	// Public is an address from a documentation range (TEST-NET-2 or -3),
	// which the egress policy treats as the public internet.
	Public netip.Addr
	// Private is an address from 10.0.0.0/8.
	Private netip.Addr
}

var (
	seq = atomic.Int32{}
	tag = func() string {
		var b [2]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	allocMu sync.Mutex // one allocation at a time within this process
)

// Skip skips t unless it runs as root with the ip command.
func Skip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// NewHost makes a namespace whose veth end holds a public-looking and a
// private address (each the .2 of a /30 whose .1 is on the test's end),
// and removes it when the test ends.
func NewHost(t testing.TB) *Host {
	t.Helper()
	Skip(t)
	n := seq.Add(1)
	h := &Host{NS: fmt.Sprintf("tweg-%s-%d", tag, n)}
	outside, inside := fmt.Sprintf("tweg%s%do", tag, n), fmt.Sprintf("tweg%s%di", tag, n)
	allocMu.Lock()
	defer allocMu.Unlock()
	pub, err := freeSubnet([]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	priv, err := freeSubnet([]netip.Prefix{netip.MustParsePrefix("10.216.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	ip(t, "netns", "add", h.NS)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.NS).Run() })
	ip(t, "link", "add", outside, "type", "veth", "peer", "name", inside)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", outside).Run() })
	ip(t, "link", "set", inside, "netns", h.NS)
	for _, sub := range []netip.Prefix{pub, priv} {
		near := sub.Addr().Next()
		far := near.Next()
		ip(t, "addr", "add", netip.PrefixFrom(near, 30).String(), "dev", outside)
		ip(t, "-n", h.NS, "addr", "add", netip.PrefixFrom(far, 30).String(), "dev", inside)
	}
	ip(t, "link", "set", outside, "up")
	ip(t, "-n", h.NS, "link", "set", inside, "up")
	ip(t, "-n", h.NS, "link", "set", "lo", "up")
	h.Public, h.Private = pub.Addr().Next().Next(), priv.Addr().Next().Next()
	return h
}

// freeSubnet picks a random /30 within one of ranges that no address or
// route of the test's namespace overlaps.
func freeSubnet(ranges []netip.Prefix) (netip.Prefix, error) {
	used, err := usedPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	for range 64 {
		r := ranges[randInt(len(ranges))]
		blocks := 1 << (30 - r.Bits())
		b := r.Addr().As4()
		off := uint32(randInt(blocks)) * 4
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		v += off
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 30)
		clash := false
		for _, u := range used {
			if u.Overlaps(cand) && u.Bits() > 0 {
				clash = true
				break
			}
		}
		if !clash {
			return cand, nil
		}
	}
	return netip.Prefix{}, errors.New("egresstest: no free /30 for a test host")
}

func randInt(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}

// usedPrefixes lists the IPv4 addresses (as their networks) and routes of
// the test's namespace.
func usedPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, args := range [][]string{{"-o", "-4", "addr", "show"}, {"-4", "route", "show", "table", "all"}} {
		b, err := exec.Command("ip", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
		for _, f := range strings.Fields(string(b)) {
			if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() {
				out = append(out, p.Masked())
			} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
				out = append(out, netip.PrefixFrom(a, 32))
			}
		}
	}
	return out, nil
}

// Listen opens a TCP listener at addr:port inside h's namespace (port 0
// picks one) and closes it when the test ends. It is served from any
// goroutine: a socket stays in the namespace it was made in.
func (h *Host) Listen(t testing.TB, addr netip.Addr, port int) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread joins the namespace and is never unlocked, so it ends
		// with this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + h.NS)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", h.NS, err)}
			return
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}

// Serve serves handler over plain HTTP at addr:port inside h's namespace
// until the test ends, and returns the listener's address.
func (h *Host) Serve(t testing.TB, addr netip.Addr, port int, handler http.Handler) netip.AddrPort {
	t.Helper()
	ln := h.Listen(t, addr, port)
	srv := &http.Server{Handler: handler}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return netip.MustParseAddrPort(ln.Addr().String())
}
