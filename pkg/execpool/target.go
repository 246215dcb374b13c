package execpool

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// ErrBadTarget classes every error of ParseTarget.
var ErrBadTarget = errors.New("bad executor target")

// Target names the members of a pool: either a fixed list of addresses or
// a DNS name whose every address is a member.
type Target struct {
	// Addrs are the members of a static target ("host:port" or
	// "unix:///path"), in the order given, without duplicates.
	Addrs []string
	// Host and Port name a DNS target: each address Host resolves to,
	// joined with Port, is a member. Host is empty for a static target.
	Host, Port string
}

// IsDNS reports whether the members come from resolving t.Host.
func (t Target) IsDNS() bool { return t.Host != "" }

// String returns t in the syntax ParseTarget reads.
func (t Target) String() string {
	if t.IsDNS() {
		return "dns:///" + net.JoinHostPort(t.Host, t.Port)
	}
	return strings.Join(t.Addrs, ",")
}

// IsPool reports whether s is meant as a pool target: a comma-separated
// list or a "dns:" name. A single address, "embedded" or a unix socket is
// not. It only looks at the form; ParseTarget says whether s is valid, so a
// caller that gets true should parse s and report its error.
func IsPool(s string) bool {
	s = strings.TrimSpace(s)
	return strings.Contains(s, ",") || strings.HasPrefix(s, "dns:")
}

// ParseTarget parses an executor target:
//
//	host:port                     one member
//	a:7070,b:7070,c:7070          a static list of members
//	dns:///name:port              every address name resolves to (re-resolved
//	                              periodically), e.g. a Kubernetes headless Service
//
// List entries may also be unix sockets ("unix:///path"). A DNS target needs
// an explicit port and no authority (the system resolver is used).
func ParseTarget(s string) (Target, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "dns:"); ok {
		return parseDNS(s, rest)
	}
	if s == "" {
		return Target{}, fmt.Errorf("%w: empty", ErrBadTarget)
	}
	var t Target
	for item := range strings.SplitSeq(s, ",") {
		addr := strings.TrimSpace(item)
		if err := checkAddr(addr); err != nil {
			return Target{}, fmt.Errorf("%w %q: %w", ErrBadTarget, s, err)
		}
		if !slices.Contains(t.Addrs, addr) {
			t.Addrs = append(t.Addrs, addr)
		}
	}
	return t, nil
}

// parseDNS parses what follows "dns:" in s: "///host:port" or "host:port".
func parseDNS(s, rest string) (Target, error) {
	if r, ok := strings.CutPrefix(rest, "//"); ok {
		authority, name, found := strings.Cut(r, "/")
		if !found {
			return Target{}, fmt.Errorf("%w %q: want dns:///host:port", ErrBadTarget, s)
		}
		if authority != "" {
			return Target{}, fmt.Errorf("%w %q: a DNS server authority is not supported; use dns:///host:port", ErrBadTarget, s)
		}
		rest = name
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return Target{}, fmt.Errorf("%w %q: want dns:///host:port: %w", ErrBadTarget, s, err)
	}
	if host == "" || port == "" {
		return Target{}, fmt.Errorf("%w %q: want dns:///host:port with both a host and a port", ErrBadTarget, s)
	}
	return Target{Host: host, Port: port}, nil
}

// checkAddr accepts "host:port" with both parts, or a unix socket.
func checkAddr(addr string) error {
	switch {
	case addr == "":
		return errors.New("empty address in list")
	case strings.HasPrefix(addr, "unix:"):
		if strings.TrimLeft(strings.TrimPrefix(addr, "unix:"), "/") == "" {
			return fmt.Errorf("%q: no socket path", addr)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port: %w", addr, err)
	}
	if host == "" || port == "" {
		return fmt.Errorf("%q: want host:port with both a host and a port", addr)
	}
	return nil
}
