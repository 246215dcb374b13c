package rpcauth_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcauth/rpcauthtest"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pki holds the certificates every test case picks from.
type pki struct {
	ca, other                                       *rpcauthtest.CA
	server, expiredServer, otherServer              rpcauthtest.Pair
	client, expiredClient, otherClient, serverAsCli rpcauthtest.Pair
	token, wrongToken                               string // token files
}

func newPKI(t *testing.T) *pki {
	dir := t.TempDir()
	p := &pki{ca: rpcauthtest.NewCA(t, dir, "ca"), other: rpcauthtest.NewCA(t, dir, "other-ca")}
	p.server = p.ca.Issue(t, "server", rpcauthtest.Options{})
	p.expiredServer = p.ca.Issue(t, "expired-server", rpcauthtest.Options{Expired: true})
	p.otherServer = p.other.Issue(t, "other-server", rpcauthtest.Options{})
	p.client = p.ca.Issue(t, "client", rpcauthtest.Options{Client: true})
	p.expiredClient = p.ca.Issue(t, "expired-client", rpcauthtest.Options{Client: true, Expired: true})
	p.otherClient = p.other.Issue(t, "other-client", rpcauthtest.Options{Client: true})
	p.serverAsCli = p.ca.Issue(t, "server-as-client", rpcauthtest.Options{})
	p.token = writeFile(t, dir, "token", "s3cret-token-0123456789abcdef\n")
	p.wrongToken = writeFile(t, dir, "wrong-token", "s3cret-token-0123456789abcdeX\n")
	return p
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// server is a toolwire gRPC server (rpcserver.New) whose only service is
// an unknown-service handler that counts the calls it runs.
type server struct {
	addr string
	ran  atomic.Int32
}

func startServer(t *testing.T, addr string, cfg *rpcauth.ServerConfig) *server {
	t.Helper()
	opts, err := cfg.ServerOptions(addr)
	if err != nil {
		t.Fatalf("ServerOptions: %v", err)
	}
	s := &server{}
	opts = append(opts, grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		s.ran.Add(1)
		var in emptypb.Empty
		if err := stream.RecvMsg(&in); err != nil {
			return err
		}
		return stream.SendMsg(&emptypb.Empty{})
	}))
	srv := rpcserver.New(nil, opts...)
	lis, err := rpcserver.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	if lis.Addr().Network() == "unix" {
		s.addr = addr
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return s
}

// call runs one RPC of the counting service with the client config and
// returns its status code, message and reason.
func call(t *testing.T, addr string, cfg *rpcauth.ClientConfig) (codes.Code, string, string) {
	t.Helper()
	opts, err := cfg.DialOptions(addr)
	if err != nil {
		t.Fatalf("DialOptions: %v", err)
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = conn.Invoke(ctx, "/toolwire.test.v1.Counter/Run", &emptypb.Empty{}, &emptypb.Empty{})
	return status.Code(err), status.Convert(err).Message(), rpcerr.Reason(err)
}

func TestAuthentication(t *testing.T) {
	p := newPKI(t)
	tcp := "127.0.0.1:0"
	tests := []struct {
		name   string
		unix   bool
		server rpcauth.ServerConfig
		client rpcauth.ClientConfig
		want   codes.Code
		msg    string // part of the status message, when it matters
		reason string // the ErrorInfo reason of a refusal by the server
	}{
		{name: "plaintext with --insecure", server: rpcauth.ServerConfig{Insecure: true},
			client: rpcauth.ClientConfig{Insecure: true}, want: codes.OK},
		{name: "TLS", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile}, want: codes.OK},
		{name: "mutual TLS", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.client.CertFile, KeyFile: p.client.KeyFile}, want: codes.OK},
		{name: "token over TLS", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, TokenFile: p.token},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, TokenFile: p.token}, want: codes.OK},
		{name: "token over a unix socket", unix: true, server: rpcauth.ServerConfig{TokenFile: p.token},
			client: rpcauth.ClientConfig{TokenFile: p.token}, want: codes.OK},
		{name: "mutual TLS and token", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile, TokenFile: p.token},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.client.CertFile, KeyFile: p.client.KeyFile, TokenFile: p.token}, want: codes.OK},

		{name: "server certificate from another CA", server: rpcauth.ServerConfig{CertFile: p.otherServer.CertFile, KeyFile: p.otherServer.KeyFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile}, want: codes.Unavailable, msg: "certificate signed by unknown authority"},
		{name: "expired server certificate", server: rpcauth.ServerConfig{CertFile: p.expiredServer.CertFile, KeyFile: p.expiredServer.KeyFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile}, want: codes.Unavailable, msg: "expired"},
		{name: "server name mismatch", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, ServerName: "executor.example"}, want: codes.Unavailable, msg: "executor.example"},
		{name: "plaintext client, TLS server", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile},
			client: rpcauth.ClientConfig{Insecure: true}, want: codes.Unavailable},
		{name: "TLS client, plaintext server", server: rpcauth.ServerConfig{Insecure: true},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile}, want: codes.Unavailable},

		{name: "no client certificate", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile}, want: codes.Unauthenticated, msg: "client certificate is required", reason: rpcerr.ClientCertRequired},
		{name: "client certificate from another CA", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.otherClient.CertFile, KeyFile: p.otherClient.KeyFile}, want: codes.Unauthenticated, msg: "unknown authority", reason: rpcerr.ClientCertInvalid},
		{name: "expired client certificate", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.expiredClient.CertFile, KeyFile: p.expiredClient.KeyFile}, want: codes.Unauthenticated, msg: "expired", reason: rpcerr.ClientCertInvalid},
		{name: "server certificate used as client certificate", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.serverAsCli.CertFile, KeyFile: p.serverAsCli.KeyFile}, want: codes.Unauthenticated, msg: "usage", reason: rpcerr.ClientCertInvalid},
		{name: "mutual TLS and token, token missing", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.ca.CertFile, TokenFile: p.token},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.client.CertFile, KeyFile: p.client.KeyFile}, want: codes.Unauthenticated, reason: rpcerr.TokenMissing},
		{name: "missing token", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, TokenFile: p.token},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile}, want: codes.Unauthenticated, reason: rpcerr.TokenMissing},
		{name: "wrong token", server: rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, TokenFile: p.token},
			client: rpcauth.ClientConfig{CAFile: p.ca.CertFile, TokenFile: p.wrongToken}, want: codes.Unauthenticated, msg: "invalid bearer token", reason: rpcerr.TokenInvalid},
		{name: "wrong token over a unix socket", unix: true, server: rpcauth.ServerConfig{TokenFile: p.token},
			client: rpcauth.ClientConfig{TokenFile: p.wrongToken}, want: codes.Unauthenticated, msg: "invalid bearer token", reason: rpcerr.TokenInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tcp
			if tt.unix {
				addr = "unix://" + filepath.Join(t.TempDir(), "s.sock")
			}
			srv := startServer(t, addr, &tt.server)
			code, msg, reason := call(t, srv.addr, &tt.client)
			if code != tt.want || !strings.Contains(msg, tt.msg) || reason != tt.reason {
				t.Fatalf("got %v %q (reason %q), want %v containing %q (reason %q)", code, msg, reason, tt.want, tt.msg, tt.reason)
			}
			wantRan := int32(0)
			if tt.want == codes.OK {
				wantRan = 1
			}
			if got := srv.ran.Load(); got != wantRan {
				t.Fatalf("the handler ran %d times, want %d", got, wantRan)
			}
		})
	}
}

// TestHealthOpenReflectionGuarded checks that probes reach the health
// service without credentials while reflection needs the token.
func TestHealthOpenReflectionGuarded(t *testing.T) {
	p := newPKI(t)
	srv := startServer(t, "127.0.0.1:0", &rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, TokenFile: p.token})
	for _, tok := range []string{"", p.token} {
		opts, err := (&rpcauth.ClientConfig{CAFile: p.ca.CertFile, TokenFile: tok}).DialOptions(srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(srv.addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("health check with token %q: %v", tok, err)
		}
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err == nil {
			// A refused stream may end before Send sees it (io.EOF); its
			// status then comes from Recv.
			_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			_, err = stream.Recv()
		}
		want := codes.Unauthenticated
		if tok != "" {
			want = codes.OK
		}
		if status.Code(err) != want || (tok == "" && rpcerr.Reason(err) != rpcerr.TokenMissing) {
			t.Errorf("reflection with token %q: %v (reason %q), want %v", tok, err, rpcerr.Reason(err), want)
		}
		cancel()
		conn.Close()
	}
}

func TestServerOptionsRefusals(t *testing.T) {
	p := newPKI(t)
	short := writeFile(t, t.TempDir(), "short", "abc\n")
	tests := []struct {
		name string
		addr string
		cfg  rpcauth.ServerConfig
		want string // "" means accepted
	}{
		{"plaintext TCP", "0.0.0.0:7070", rpcauth.ServerConfig{}, "pass --tls-cert and --tls-key"},
		{"plaintext TCP with token only", "127.0.0.1:7070", rpcauth.ServerConfig{TokenFile: p.token}, "or --insecure"},
		{"plaintext TCP with --insecure", "127.0.0.1:7070", rpcauth.ServerConfig{Insecure: true}, ""},
		{"plaintext unix socket", "unix:///run/toolsvc.sock", rpcauth.ServerConfig{}, ""},
		{"TLS and --insecure", "127.0.0.1:7070", rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, Insecure: true}, "contradict"},
		{"client CA without certificate", "127.0.0.1:7070", rpcauth.ServerConfig{ClientCAFile: p.ca.CertFile}, "needs --tls-cert"},
		{"certificate without key", "127.0.0.1:7070", rpcauth.ServerConfig{CertFile: p.server.CertFile}, "needs its key"},
		{"key that is no CA file", "127.0.0.1:7070", rpcauth.ServerConfig{CertFile: p.server.CertFile, KeyFile: p.server.KeyFile, ClientCAFile: p.server.KeyFile}, "holds no PEM certificate"},
		{"short token", "unix:///run/toolsvc.sock", rpcauth.ServerConfig{TokenFile: short}, "at least 16"},
		{"missing token file", "unix:///run/toolsvc.sock", rpcauth.ServerConfig{TokenFile: filepath.Join(t.TempDir(), "none")}, "read token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.ServerOptions(tt.addr)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	p := newPKI(t)
	t.Run("server", func(t *testing.T) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		cfg := rpcauth.RegisterServerFlags(fs)
		if err := fs.Parse([]string{"--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile, "--tls-client-ca", p.ca.CertFile, "--token-file", p.token}); err != nil {
			t.Fatal(err)
		}
		if cfg.CertFile != p.server.CertFile || cfg.KeyFile != p.server.KeyFile || cfg.ClientCAFile != p.ca.CertFile || cfg.TokenFile != p.token || cfg.Insecure {
			t.Fatalf("flags not applied: %+v", cfg)
		}
		if _, err := cfg.ServerOptions("0.0.0.0:7070"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("client with prefix", func(t *testing.T) {
		fs := flag.NewFlagSet("orchestrator", flag.ContinueOnError)
		cfg := rpcauth.RegisterClientFlags(fs, "executor-")
		if err := fs.Parse([]string{"--executor-tls-ca", p.ca.CertFile, "--executor-tls-cert", p.client.CertFile, "--executor-tls-key", p.client.KeyFile}); err != nil {
			t.Fatal(err)
		}
		if cfg.CAFile != p.ca.CertFile || cfg.CertFile != p.client.CertFile || cfg.KeyFile != p.client.KeyFile {
			t.Fatalf("flags not applied: %+v", cfg)
		}
		if fs.Lookup("tls-ca") != nil || fs.Lookup("executor-insecure") == nil || fs.Lookup("executor-token-file") == nil {
			t.Fatal("prefixed flags not registered as expected")
		}
	})
	t.Run("client refuses plaintext TCP", func(t *testing.T) {
		fs := flag.NewFlagSet("orchestrator", flag.ContinueOnError)
		cfg := rpcauth.RegisterClientFlags(fs, "executor-")
		_, err := cfg.DialOptions("10.0.0.2:7070")
		if err == nil || !strings.Contains(err.Error(), "--executor-tls-ca") || !strings.Contains(err.Error(), "--executor-insecure") {
			t.Fatalf("got %v, want a refusal naming --executor-tls-ca and --executor-insecure", err)
		}
		if _, err := cfg.DialOptions("unix:///run/toolsvc.sock"); err != nil {
			t.Fatalf("unix socket refused: %v", err)
		}
	})
}

// TestTokenFromEnvironment checks that the token can come from the
// environment on both ends, under the names the flags document.
func TestTokenFromEnvironment(t *testing.T) {
	env := map[string]string{
		"TOOLWIRE_TOKEN":          "env-token-0123456789abcdef",
		"TOOLWIRE_EXECUTOR_TOKEN": "env-token-0123456789abcdef",
	}
	getenv := func(k string) string { return env[k] }
	sock := "unix://" + filepath.Join(t.TempDir(), "s.sock")
	srvCfg := rpcauth.RegisterServerFlags(flag.NewFlagSet("s", flag.ContinueOnError))
	srvCfg.Getenv = getenv
	srv := startServer(t, sock, srvCfg)

	good := rpcauth.RegisterClientFlags(flag.NewFlagSet("c", flag.ContinueOnError), "executor-")
	good.Getenv = getenv
	if code, msg, _ := call(t, srv.addr, good); code != codes.OK {
		t.Fatalf("token from $TOOLWIRE_EXECUTOR_TOKEN: %v %s", code, msg)
	}
	none := rpcauth.RegisterClientFlags(flag.NewFlagSet("c", flag.ContinueOnError), "other-")
	none.Getenv = getenv
	if code, _, _ := call(t, srv.addr, none); code != codes.Unauthenticated {
		t.Fatalf("client without a token: %v, want Unauthenticated", code)
	}
	if got := srv.ran.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
}

// TestMalformedAuthorization checks the reason of an authorization header
// that is not "Bearer <token>": the token is invalid, not missing.
func TestMalformedAuthorization(t *testing.T) {
	p := newPKI(t)
	sock := "unix://" + filepath.Join(t.TempDir(), "s.sock")
	srv := startServer(t, sock, &rpcauth.ServerConfig{TokenFile: p.token})
	opts, err := (&rpcauth.ClientConfig{}).DialOptions(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, header := range []string{"Basic dXNlcjpwYXNz", "s3cret-token-0123456789abcdef"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", header)
		err := conn.Invoke(ctx, "/toolwire.test.v1.Counter/Run", &emptypb.Empty{}, &emptypb.Empty{})
		cancel()
		if status.Code(err) != codes.Unauthenticated || rpcerr.Reason(err) != rpcerr.TokenInvalid {
			t.Errorf("authorization %q: %v (reason %q), want Unauthenticated with %s", header, err, rpcerr.Reason(err), rpcerr.TokenInvalid)
		}
	}
	if got := srv.ran.Load(); got != 0 {
		t.Fatalf("handler ran %d times, want 0", got)
	}
}
