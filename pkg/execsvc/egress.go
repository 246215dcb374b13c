package execsvc

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
)

// webPolicy is what the executor's own web requests (WebFetch) may reach
// for a session on network: with "allowlist" the session's egress policy
// (session); with "host" every host but the operator's and the session's
// denied domains, with the operator's address ranges; with "none"
// nothing (nil).
func webPolicy(network string, session, operator egress.Policy, n settings.Network) (*egress.Policy, error) {
	switch network {
	case sandbox.NetworkAllowlist:
		return &session, nil
	case sandbox.NetworkHost:
		p := egress.Policy{Allowed: []egress.Rule{{Wildcard: true}}, Addresses: operator.Addresses}
		p = p.Deny(operator.Denied)
		denied, err := egress.ParseRules(n.DeniedDomains)
		if err != nil {
			return nil, fmt.Errorf("the session's sandbox.network.deniedDomains: %w", err)
		}
		p = p.Deny(denied)
		return &p, nil
	}
	return nil, nil
}

// operatorPolicy is the executor's egress policy: the configured one with
// the network lists of the operator's settings added (Claude Code's
// sandbox.network.allowedDomains and deniedDomains).
func operatorPolicy(p egress.Policy, n settings.Network) (egress.Policy, error) {
	allowed, err := egress.ParseRules(n.AllowedDomains)
	if err != nil {
		return p, fmt.Errorf("settings: sandbox.network.allowedDomains: %w", err)
	}
	denied, err := egress.ParseRules(n.DeniedDomains)
	if err != nil {
		return p, fmt.Errorf("settings: sandbox.network.deniedDomains: %w", err)
	}
	p.Allowed = append(append([]egress.Rule(nil), p.Allowed...), allowed...)
	return p.Deny(denied), nil
}

// sessionPolicy narrows the operator's policy by a session's network
// settings: an allowed list given (even empty) keeps only what both
// allow; denied entries add to the operator's.
func sessionPolicy(operator egress.Policy, n settings.Network) (egress.Policy, error) {
	p := operator
	if n.AllowedDomains != nil {
		allowed, err := egress.ParseRules(n.AllowedDomains)
		if err != nil {
			return p, fmt.Errorf("the session's sandbox.network.allowedDomains: %w", err)
		}
		p = p.NarrowTo(allowed)
	}
	denied, err := egress.ParseRules(n.DeniedDomains)
	if err != nil {
		return p, fmt.Errorf("the session's sandbox.network.deniedDomains: %w", err)
	}
	return p.Deny(denied), nil
}

// serveEgress serves a session's egress proxy on ln, the socket inside the
// session's network namespace, until the proxy is closed. Its refusals
// are logged with the session's id.
func serveEgress(ln net.Listener, p egress.Policy, log *slog.Logger, sessionID string) *egress.Proxy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("session_id", sessionID)
	proxy := egress.New(egress.Config{Policy: p, Logger: log})
	go func() {
		if err := proxy.Serve(ln); err != nil && !errors.Is(err, egress.ErrClosed) {
			log.Error("egress proxy stopped", "err", err)
		}
	}()
	return proxy
}
