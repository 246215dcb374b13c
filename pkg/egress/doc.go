// Package egress is the network allowlist of a sandboxed session: a policy
// of allowed and denied domains (and ports), and the HTTP proxy that
// enforces it for processes that can reach nothing else.
//
// The sandbox (pkg/sandbox, network "allowlist") gives a session's
// processes a network namespace of their own with only loopback, and a
// listening socket inside it at 127.0.0.1:PORT that the executor serves
// with a Proxy; HTTP_PROXY and HTTPS_PROXY point there. The proxy takes
// CONNECT host:port (HTTPS and any other protocol a client tunnels) and
// plain HTTP requests with absolute http:// URLs. For each it
//
//   - checks the host and port against the Policy by name: a denied
//     domain, or a host:port that no allowed entry covers, is refused;
//   - resolves the name once and keeps only the addresses the policy
//     allows: loopback, private, link-local and other special-purpose
//     addresses are refused unless the policy lists their range, so a
//     name that resolves (or rebinds) to an internal address is refused;
//   - dials the checked address itself, never the name again, so that a
//     second DNS answer cannot change where the connection goes.
//
// A refusal is an HTTP 403 whose body names the host, the rule and the
// policy; it is counted (toolwire.egress.connections) and logged with the
// session. A plain HTTP request gets the upstream's response as it is: the
// proxy never follows a redirect, so a redirect to an internal address
// reaches the client as a redirect, and following it is a new request the
// proxy checks like any other.
//
// The package knows nothing of sessions, gRPC or the sandbox: it serves a
// net.Listener it is given and dials from wherever it runs.
//
// Why one package of this size (about 1,050 lines): the policy and the
// proxy that enforces it share the address checks, and splitting them
// would let a caller dial without the checks.
package egress
