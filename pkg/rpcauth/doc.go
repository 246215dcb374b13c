// Package rpcauth secures the gRPC links of toolsvc and orchestrator: TLS,
// mutual TLS and bearer tokens, configured by the same command-line flags on
// every server and client.
//
// # Servers
//
// ServerFlags registers --tls-cert, --tls-key, --tls-client-ca, --token-file
// and --insecure. ServerFlags.ServerOptions turns them into gRPC server
// options for one listen address:
//
//   - --tls-cert and --tls-key serve TLS 1.3.
//   - --tls-client-ca adds mutual TLS: every RPC must come over a
//     connection whose client certificate chains to that CA, is within its
//     validity period and is meant for client authentication.
//   - --token-file (or the TOOLWIRE_TOKEN environment variable) requires
//     "authorization: Bearer <token>" on every RPC, compared in constant
//     time. The token never appears on the command line.
//   - A TCP listener with neither TLS nor --insecure refuses to start and
//     says what to pass. A unix socket may be plaintext: only processes
//     that can open the socket file reach it.
//
// Client certificates are requested during the handshake but checked by
// the auth interceptor, so a peer with no certificate, an expired one or one
// from another CA gets codes.Unauthenticated with a reason instead of a
// broken connection, exactly like a missing or wrong token. The reason is
// also in the status's ErrorInfo (pkg/rpcerr): CLIENT_CERT_REQUIRED,
// CLIENT_CERT_INVALID, TOKEN_MISSING or TOKEN_INVALID. When both a
// client CA and a token are configured, both are required. In every case
// the check runs before any handler, so nothing executes for such a peer.
//
// The standard health service (grpc.health.v1.Health) is left open: it says
// only whether the server is serving, and load balancers and probes must
// reach it without credentials. Server reflection and every toolwire
// service require authentication when any is configured.
//
// # Clients
//
// ClientFlags registers --tls-ca, --tls-cert, --tls-key, --tls-server-name,
// --token-file and --insecure, optionally with a prefix (the orchestrator
// uses "executor-" for its link to toolsvc). ClientFlags.DialOptions turns
// them into dial options for one target: TLS is used when a CA or client
// certificate is given; plaintext only on a unix socket or with --insecure.
// The token (from --token-file or TOOLWIRE_<PREFIX>TOKEN) is sent as
// per-RPC credentials, which gRPC refuses to send over plaintext TCP unless
// --insecure was given.
package rpcauth
