package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Dialer opens connections under a Policy for a client inside the
// executor itself (WebFetch), with the proxy's checks: the name against
// the allowed and denied domains, then every address it resolves to, and
// the connection goes to a checked address, never to the name again, so
// that a second DNS answer (rebinding) cannot send it elsewhere. Give its
// DialContext to an http.Transport; a redirect is a new request, dialled
// and checked like the first.
type Dialer struct {
	// Policy decides what may be reached.
	Policy Policy
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dial opens a TCP connection to an "ip:port" address; nil means a
	// net.Dialer with DefaultDialTimeout.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// DialContext connects to address ("host:port") if the policy allows it.
// A refusal is a *Denial (errors.As finds it); any other error is a
// failure to resolve or connect.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := splitTarget(address, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %q: %w", address, err)
	}
	resolver, dial := d.Resolver, d.Dial
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	if dial == nil {
		nd := &net.Dialer{Timeout: DefaultDialTimeout}
		dial = nd.DialContext
	}
	c, _, denial, err := dialChecked(ctx, d.Policy, resolver, dial, host, port)
	if denial != nil {
		return nil, denial
	}
	return c, err
}

// Check applies the policy's rules to host:port without connecting: the
// name rules, and for an IP address written as the host, the address
// rules. It returns nil when the name may be tried (its resolved
// addresses are checked when it is dialled).
func (p Policy) Check(host string, port int) *Denial {
	host = normalizeHost(host)
	if d := p.checkName(host, port); d != nil {
		return d
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if sr, ok := p.checkAddr(a); !ok {
			return &Denial{Host: host, Port: port, Reason: ReasonAddress, Addr: a.Unmap(), Range: sr.prefix, What: sr.what}
		}
	}
	return nil
}

// dialChecked checks host:port against pol, resolves it once, and dials
// the first address pol allows. It returns a Denial when pol refuses, an
// error when the connection fails otherwise, and the address dialled.
func dialChecked(ctx context.Context, pol Policy, resolver Resolver, dial func(ctx context.Context, network, address string) (net.Conn, error),
	host string, port int) (net.Conn, netip.Addr, *Denial, error) {
	host = normalizeHost(host)
	if d := pol.checkName(host, port); d != nil {
		return nil, netip.Addr{}, d, nil
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lctx, cancel := context.WithTimeout(ctx, DefaultDialTimeout)
		addrs, err = resolver.LookupNetIP(lctx, "ip", host)
		cancel()
		if err != nil {
			return nil, netip.Addr{}, nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	var allowed []netip.Addr
	var refused *Denial
	for _, a := range addrs {
		a = a.Unmap()
		if sr, ok := pol.checkAddr(a); !ok {
			if refused == nil {
				refused = &Denial{Host: host, Port: port, Reason: ReasonAddress, Addr: a, Range: sr.prefix, What: sr.what}
			}
			continue
		}
		allowed = append(allowed, a)
	}
	if len(allowed) == 0 {
		if refused == nil {
			return nil, netip.Addr{}, nil, fmt.Errorf("resolve %s: no addresses", host)
		}
		return nil, netip.Addr{}, refused, nil
	}
	var lastErr error
	for _, a := range allowed {
		// The checked address itself: a second lookup could answer
		// differently (DNS rebinding).
		c, err := dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err != nil {
			lastErr = err
			continue
		}
		return c, a, nil, nil
	}
	return nil, netip.Addr{}, nil, fmt.Errorf("connect to %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), lastErr)
}
