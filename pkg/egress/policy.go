package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rule is one entry of an allowed or denied list, in the shape of Claude
// Code's sandbox.network.allowedDomains: "example.com" (that host),
// "*.example.com" (its subdomains, not itself), "*" (every host), each
// optionally with ":PORT" to cover that port only; an IP address ("203.0.113.7",
// "[2001:db8::1]:443") covers that address as written in a request.
type Rule struct {
	// Host is the host in lower case without a trailing dot; for a
	// wildcard, the domain whose subdomains it covers ("" for "*").
	Host string
	// Wildcard makes the rule cover the subdomains of Host.
	Wildcard bool
	// Port is the one port covered; 0 covers every port.
	Port int
}

// ParseRule parses one entry.
func ParseRule(s string) (Rule, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Rule{}, fmt.Errorf("empty domain entry")
	}
	var r Rule
	host := s
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Rule{}, fmt.Errorf("domain entry %q: missing ]", in)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return Rule{}, fmt.Errorf("domain entry %q: unexpected %q after the address", in, rest)
			}
			port, err := parsePort(p)
			if err != nil {
				return Rule{}, fmt.Errorf("domain entry %q: %w", in, err)
			}
			r.Port = port
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return Rule{}, fmt.Errorf("domain entry %q: %q is not an IPv6 address", in, host)
		}
	case strings.Count(s, ":") == 1:
		h, p, _ := strings.Cut(s, ":")
		port, err := parsePort(p)
		if err != nil {
			return Rule{}, fmt.Errorf("domain entry %q: %w", in, err)
		}
		host, r.Port = h, port
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.Host = a.Unmap().String()
		return r, nil
	}
	if host == "*" {
		r.Wildcard = true
		return r, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Wildcard, host = true, rest
	}
	host = strings.TrimSuffix(host, ".")
	if err := checkDomain(host); err != nil {
		return Rule{}, fmt.Errorf("domain entry %q: %w", in, err)
	}
	r.Host = host
	return r, nil
}

// ParseRules parses entries, naming the first bad one.
func ParseRules(entries []string) ([]Rule, error) {
	var out []Rule
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// checkDomain accepts DNS names: dot-separated labels of letters, digits,
// hyphens and underscores.
func checkDomain(h string) error {
	if h == "" || len(h) > 253 {
		return fmt.Errorf("%q is not a domain name", h)
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a domain name", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a domain name (character %q)", h, c)
			}
		}
	}
	return nil
}

// String returns the entry as it would be written.
func (r Rule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*"
		if r.Host != "" {
			h = "*." + r.Host
		}
	}
	if r.Port == 0 {
		return h
	}
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(r.Port)
}

// coversHost reports whether r covers host, a normalised request host.
func (r Rule) coversHost(host string) bool {
	if !r.Wildcard {
		return host == r.Host
	}
	return r.Host == "" || strings.HasSuffix(host, "."+r.Host)
}

// covers reports whether r covers host:port.
func (r Rule) covers(host string, port int) bool {
	return r.coversHost(host) && (r.Port == 0 || r.Port == port)
}

// intersect returns the rule covering exactly what both a and b cover, if
// anything: in this language of names, subdomain wildcards and single
// ports, that is always one rule.
func intersect(a, b Rule) (Rule, bool) {
	port := a.Port
	switch {
	case a.Port == 0:
		port = b.Port
	case b.Port != 0 && a.Port != b.Port:
		return Rule{}, false
	}
	var out Rule
	switch {
	case !a.Wildcard && !b.Wildcard:
		if a.Host != b.Host {
			return Rule{}, false
		}
		out = a
	case !a.Wildcard:
		if !b.coversHost(a.Host) {
			return Rule{}, false
		}
		out = a
	case !b.Wildcard:
		if !a.coversHost(b.Host) {
			return Rule{}, false
		}
		out = b
	case a.Host == b.Host || b.Host == "" || strings.HasSuffix(a.Host, "."+b.Host):
		out = a // a's subdomains lie within b's
	case a.Host == "" || strings.HasSuffix(b.Host, "."+a.Host):
		out = b
	default:
		return Rule{}, false
	}
	out.Port = port
	return out, true
}

// Policy is what a session's processes may reach through the proxy.
type Policy struct {
	// Allowed are the hosts and ports that may be reached. Empty allows
	// nothing.
	Allowed []Rule
	// Denied are never reached, even when Allowed covers them.
	Denied []Rule
	// Addresses are special-purpose address ranges (loopback, private,
	// link-local, ...) that may be reached all the same, for an internal
	// package mirror, say. Public addresses need no entry.
	Addresses []netip.Prefix
}

// NewPolicy parses the entries of a policy: allowed and denied domains,
// and address ranges ("10.1.2.0/24", or one address).
func NewPolicy(allowed, denied, addresses []string) (Policy, error) {
	var p Policy
	var err error
	if p.Allowed, err = ParseRules(allowed); err != nil {
		return Policy{}, err
	}
	if p.Denied, err = ParseRules(denied); err != nil {
		return Policy{}, err
	}
	for _, a := range addresses {
		pfx, err := parsePrefix(a)
		if err != nil {
			return Policy{}, err
		}
		p.Addresses = append(p.Addresses, pfx)
	}
	return p, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("address range %q: %w", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("address range %q: not an address or CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// NarrowTo returns p with its allowed hosts cut down to those allowed also
// covers: a session's own list narrows the operator's and never widens
// it. An entry of allowed that p does not cover adds nothing.
func (p Policy) NarrowTo(allowed []Rule) Policy {
	var out []Rule
	for _, a := range p.Allowed {
		for _, b := range allowed {
			if r, ok := intersect(a, b); ok && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	p.Allowed = out
	p.Denied = slices.Clip(p.Denied)
	return p
}

// Deny returns p with more denied entries.
func (p Policy) Deny(denied []Rule) Policy {
	p.Denied = append(slices.Clip(p.Denied), denied...)
	return p
}

// AllowedEntries returns the allowed entries as written.
func (p Policy) AllowedEntries() []string {
	out := make([]string, len(p.Allowed))
	for i, r := range p.Allowed {
		out[i] = r.String()
	}
	return out
}

// checkName applies the name rules to a normalised host and a port; nil
// means allowed so far (its addresses are checked after resolution).
func (p Policy) checkName(host string, port int) *Denial {
	for _, r := range p.Denied {
		if r.covers(host, port) {
			return &Denial{Host: host, Port: port, Reason: ReasonDeniedDomain, Rule: r.String()}
		}
	}
	var sameHost []string
	for _, r := range p.Allowed {
		if r.covers(host, port) {
			return nil
		}
		// "*:PORT" covers every host: the port, not the host, is what it
		// names, so it does not make this a port refusal.
		if r.coversHost(host) && (!r.Wildcard || r.Host != "") {
			sameHost = append(sameHost, r.String())
		}
	}
	if len(sameHost) > 0 {
		return &Denial{Host: host, Port: port, Reason: ReasonPort, Rule: strings.Join(sameHost, ", ")}
	}
	return &Denial{Host: host, Port: port, Reason: ReasonNotAllowed}
}

// checkAddr says whether addr may be dialled: a public address, or a
// special-purpose one inside Addresses. It returns the range that forbids
// it otherwise.
func (p Policy) checkAddr(addr netip.Addr) (forbidden specialRange, ok bool) {
	addr = addr.Unmap()
	sr, special := classify(addr)
	if !special {
		return specialRange{}, true
	}
	for _, a := range p.Addresses {
		if a.Contains(addr) {
			return specialRange{}, true
		}
	}
	return sr, false
}

// specialRange is an address range that is not the public internet.
type specialRange struct {
	prefix netip.Prefix
	what   string
}

// specialRanges are refused unless the policy lists them: what a tool
// could use to reach the executor's host, its network or a cloud
// metadata service rather than the internet.
var specialRanges = func() []specialRange {
	var out []specialRange
	for _, r := range []struct{ cidr, what string }{
		{"0.0.0.0/8", "a \"this network\" address"},
		{"10.0.0.0/8", "a private address"},
		{"100.64.0.0/10", "a shared (carrier-grade NAT) address"},
		{"127.0.0.0/8", "a loopback address"},
		{"169.254.0.0/16", "a link-local address"},
		{"172.16.0.0/12", "a private address"},
		{"192.0.0.0/24", "an IETF protocol assignment"},
		{"192.168.0.0/16", "a private address"},
		{"198.18.0.0/15", "a benchmarking address"},
		{"224.0.0.0/4", "a multicast address"},
		{"240.0.0.0/4", "a reserved address"},
		{"::/128", "the unspecified address"},
		{"::1/128", "a loopback address"},
		{"64:ff9b:1::/48", "a local-use NAT64 address"},
		{"fc00::/7", "a private (unique local) address"},
		{"fe80::/10", "a link-local address"},
		{"ff00::/8", "a multicast address"},
	} {
		out = append(out, specialRange{netip.MustParsePrefix(r.cidr), r.what})
	}
	return out
}()

// nat64 is the well-known NAT64 prefix: its addresses carry an IPv4
// address in their last 32 bits, which is what they reach.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func classify(addr netip.Addr) (specialRange, bool) {
	if nat64.Contains(addr) {
		b := addr.As16()
		if sr, ok := classify(netip.AddrFrom4([4]byte(b[12:]))); ok {
			return sr, true
		}
	}
	for _, sr := range specialRanges {
		if sr.prefix.Contains(addr) {
			return sr, true
		}
	}
	return specialRange{}, false
}

// normalizeHost lower-cases a request host, drops a trailing dot and
// writes an IP address in its canonical form.
func normalizeHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}
