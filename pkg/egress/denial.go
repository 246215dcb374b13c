package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Reason says why a connection was refused. The values are few and fixed,
// fit for a metric attribute.
type Reason string

// Reasons.
const (
	// ReasonNotAllowed: no allowed entry covers the host.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonPort: entries cover the host, but not this port.
	ReasonPort Reason = "port_not_allowed"
	// ReasonDeniedDomain: a denied entry covers the host.
	ReasonDeniedDomain Reason = "denied_domain"
	// ReasonAddress: every address of the host is loopback, private,
	// link-local or otherwise special, and the policy allows none of them.
	ReasonAddress Reason = "special_address"
	// ReasonProtocol: what the client sent is not a proxy request the
	// proxy serves (not HTTP, an origin-form request, a scheme other than
	// http).
	ReasonProtocol Reason = "protocol"
	// ReasonBusy: the session has as many connections open as it may.
	ReasonBusy Reason = "too_many_connections"
)

// Denial is one refused connection.
type Denial struct {
	// Time is when it was refused.
	Time time.Time
	// Method is the request's method (CONNECT, GET, ...); empty when the
	// request could not be read.
	Method string
	// Host and Port are the destination asked for.
	Host string
	Port int
	// Reason says why.
	Reason Reason
	// Rule is the entry that decided, when one did: the denied entry, or
	// the entries that cover the host at other ports.
	Rule string
	// Addr is the address refused for ReasonAddress; Range and What name
	// its range.
	Addr  netip.Addr
	Range netip.Prefix
	What  string
	// Detail says more for ReasonProtocol.
	Detail string
}

// Target returns "host:port".
func (d *Denial) Target() string {
	if d.Host == "" {
		return ""
	}
	h := d.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(d.Port)
}

// Why says in words why the connection was refused, naming the rule.
func (d *Denial) Why() string {
	switch d.Reason {
	case ReasonNotAllowed:
		return fmt.Sprintf("%s is not an allowed domain", d.Host)
	case ReasonPort:
		return fmt.Sprintf("port %d is not allowed for %s (allowed: %s)", d.Port, d.Host, d.Rule)
	case ReasonDeniedDomain:
		return fmt.Sprintf("%s is a denied domain (entry %s)", d.Host, d.Rule)
	case ReasonAddress:
		if d.Host == d.Addr.String() {
			return fmt.Sprintf("%s is %s (%s), which the policy does not allow", d.Host, d.What, d.Range)
		}
		return fmt.Sprintf("%s resolves to %s, %s (%s), which the policy does not allow", d.Host, d.Addr, d.What, d.Range)
	case ReasonProtocol:
		return d.Detail
	case ReasonBusy:
		return "the session has too many connections open through the proxy"
	}
	return string(d.Reason)
}

// Error returns the one-line message of the refusal.
func (d *Denial) Error() string {
	if t := d.Target(); t != "" {
		return fmt.Sprintf("egress policy refused %s: %s", t, d.Why())
	}
	return "egress policy refused the request: " + d.Why()
}
