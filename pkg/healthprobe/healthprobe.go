// Package healthprobe is the `health` subcommand of toolsvc and
// orchestrator: one call of the standard gRPC health service
// (grpc.health.v1.Health/Check) that exits 0 when the server says SERVING
// and otherwise prints one line saying why not. Kubernetes exec probes,
// Docker's HEALTHCHECK and Compose health checks run it inside the
// container, so it speaks whatever the server speaks: plaintext, TLS,
// mutual TLS and bearer tokens, with the client flags of package rpcauth.
//
// Two kinds of check:
//
//   - readiness (the default): the service must be SERVING. A draining
//     toolsvc reports NOT_SERVING from its SIGTERM on, so a readiness
//     probe fails for as long as the drain lasts.
//   - liveness (--live): any answer of the health service passes, SERVING
//     or not. A draining server is alive and must not be restarted: that
//     would kill the very calls the drain waits for. Only a server that
//     does not answer within --timeout (hung, not listening, or refusing
//     the handshake) fails.
//
// It is not a client library: package rpcserver's WaitServing is the one
// for programs that wait for a server.
package healthprobe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// DefaultTimeout bounds one probe: connecting, the TLS handshake and the
// Check call together. It stays below the usual probe timeouts (Docker's
// HEALTHCHECK and the manifests give 5 s) so the probe reports its own
// reason instead of being killed.
const DefaultTimeout = 3 * time.Second

// Command describes the health subcommand of one program.
type Command struct {
	// Program is the binary's name ("toolsvc"), for usage and messages.
	Program string
	// Addr is the default of --addr: where the program serves by default.
	Addr string
	// Service is the default of --service: the program's gRPC service.
	Service string
	// Getenv reads the environment (the bearer token variable); nil means
	// os.Getenv.
	Getenv func(string) string
}

// ErrUsage marks a command-line mistake the flag set already reported.
var ErrUsage = errors.New("usage")

// Run parses args, probes the server once and returns nil when it passed.
// The error of a failed probe is one line: what was asked of whom, and
// why it failed. On success Run prints the status to stdout.
func (c Command) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(c.Program+" health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", c.Addr, `server address: "host:port" or "unix:///path/to.sock"`)
	service := fs.String("service", c.Service, `service to check; "" asks about the server as a whole`)
	timeout := fs.Duration("timeout", DefaultTimeout, "give up after this long: connecting, handshake and answer together")
	live := fs.Bool("live", false, "liveness: pass on any answer, SERVING or not (a draining server is alive)")
	security := rpcauth.RegisterClientFlags(fs, "")
	security.Getenv = c.Getenv
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: %[1]s health [flags]

Asks a %[1]s server's gRPC health service once and exits 0 when the service
is SERVING, 1 with a one-line reason otherwise (NOT_SERVING while it drains
after SIGTERM, unknown service, no answer within --timeout, refused
handshake). With --live any answer passes: use it for liveness probes, the
default for readiness. The health service needs no client certificate or
token, but the transport must match the server's: --tls-ca (and
--tls-server-name when the certificate does not name --addr) for TLS,
--insecure for plaintext TCP.

Flags:
`, c.Program)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s health: unexpected argument %q\n", c.Program, fs.Arg(0))
		return ErrUsage
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "%s health: --timeout must be positive, not %v\n", c.Program, *timeout)
		return ErrUsage
	}
	opts, err := security.DialOptions(*addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := Check(ctx, *addr, *service, opts...)
	what := describe(*service, *addr)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s", what, reason(err, *timeout))
	case *live:
		fmt.Fprintf(stdout, "%s is alive (%s)\n", what, st)
		return nil
	case st != healthpb.HealthCheckResponse_SERVING:
		return fmt.Errorf("%s is %s%s", what, st, hint(st))
	}
	fmt.Fprintf(stdout, "%s is %s\n", what, st)
	return nil
}

// Check asks the health service at addr about service, over a connection
// made with opts and closed before it returns. ctx bounds the whole of it.
// An error means no answer came: the server was not reached, refused the
// connection or the call, or does not know service.
func Check(ctx context.Context, addr, service string, opts ...grpc.DialOption) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(target(addr), opts...)
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	return resp.GetStatus(), nil
}

// target turns an address into a gRPC target: a unix address or one with
// a resolver scheme stays as it is; host:port is dialled as it is, with
// no name resolution beyond the dialer's own.
func target(addr string) string {
	if _, unix := rpcserver.UnixPath(addr); unix || strings.Contains(addr, "://") {
		return addr
	}
	return "passthrough:///" + addr
}

// describe names what was probed.
func describe(service, addr string) string {
	if service == "" {
		return "server at " + addr
	}
	return service + " at " + addr
}

// reason is the one-line cause of a failed Check.
func reason(err error, timeout time.Duration) string {
	s, ok := status.FromError(err)
	if !ok {
		return firstLine(err.Error())
	}
	switch s.Code() {
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %v", timeout)
	case codes.NotFound:
		return "the server does not know this service"
	case codes.Unimplemented:
		return "the server has no gRPC health service"
	}
	return fmt.Sprintf("%s: %s", s.Code(), firstLine(s.Message()))
}

// hint explains a status that is not SERVING.
func hint(st healthpb.HealthCheckResponse_ServingStatus) string {
	if st == healthpb.HealthCheckResponse_NOT_SERVING {
		return " (draining or stopping)"
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
