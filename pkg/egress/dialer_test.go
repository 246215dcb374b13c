package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/pkg/egress"
)

// TestDialerChecksEveryAddress: the Dialer refuses a name by the domain
// rules and by the addresses it resolves to, and connects to the checked
// address, never resolving the name a second time.
func TestDialerChecksEveryAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	pol, err := egress.NewPolicy([]string{"*.example.test"}, []string{"bad.example.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := newResolver()
	public := netip.MustParseAddr("203.0.113.7")
	res.set("ok.example.test", addrs(public), addrs(netip.MustParseAddr("127.0.0.1")))
	res.set("inside.example.test", addrs(netip.MustParseAddr("10.1.2.3")))
	var mu sync.Mutex
	var dialled []string
	d := &egress.Dialer{Policy: pol, Resolver: res, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		var nd net.Dialer
		return nd.DialContext(ctx, network, ln.Addr().String())
	}}
	ctx := context.Background()

	c, err := d.DialContext(ctx, "tcp", "ok.example.test:443")
	if err != nil {
		t.Fatalf("allowed host: %v", err)
	}
	c.Close()
	if len(dialled) != 1 || dialled[0] != "203.0.113.7:443" {
		t.Fatalf("dialled %v, want the checked address 203.0.113.7:443", dialled)
	}
	if n := res.lookups("ok.example.test"); n != 1 {
		t.Fatalf("%d lookups of the name, want 1", n)
	}
	// The second answer is loopback: a rebinding the next dial refuses.
	_, err = d.DialContext(ctx, "tcp", "ok.example.test:443")
	var denial *egress.Denial
	if !errors.As(err, &denial) || denial.Reason != egress.ReasonAddress {
		t.Fatalf("rebound name: err %v, want a special_address denial", err)
	}
	for addr, want := range map[string]egress.Reason{
		"inside.example.test:80": egress.ReasonAddress,
		"bad.example.test:80":    egress.ReasonDeniedDomain,
		"other.test:80":          egress.ReasonNotAllowed,
		"127.0.0.1:80":           egress.ReasonNotAllowed,
	} {
		_, err := d.DialContext(ctx, "tcp", addr)
		if !errors.As(err, &denial) || denial.Reason != want {
			t.Errorf("%s: err %v, want a %s denial", addr, err, want)
		}
	}
	if len(dialled) != 1 {
		t.Fatalf("refused targets were dialled: %v", dialled)
	}

	// Policy.Check refuses an address written as the host before any
	// connection.
	open, _ := egress.NewPolicy([]string{"*"}, nil, nil)
	if d := open.Check("127.0.0.1", 80); d == nil || d.Reason != egress.ReasonAddress {
		t.Fatalf("Check(127.0.0.1) = %v, want a special_address denial", d)
	}
	if d := open.Check("example.com", 443); d != nil {
		t.Fatalf("Check(example.com) = %v, want nil", d)
	}
}
