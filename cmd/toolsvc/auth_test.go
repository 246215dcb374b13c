package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/rpcserver"

	"google.golang.org/grpc"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcauth/rpcauthtest"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// testPKI is a CA with server and client certificates, a second CA, and a
// token, all made for one test.
type testPKI struct {
	dir                                       string
	ca, other                                 *rpcauthtest.CA
	server, expiredServer, client, otherCient rpcauthtest.Pair
	token, wrongToken                         string
}

func newTestPKI(t testing.TB) *testPKI {
	dir := t.TempDir()
	p := &testPKI{dir: dir, ca: rpcauthtest.NewCA(t, dir, "ca"), other: rpcauthtest.NewCA(t, dir, "other-ca")}
	p.server = p.ca.Issue(t, "server", rpcauthtest.Options{})
	p.expiredServer = p.ca.Issue(t, "expired-server", rpcauthtest.Options{Expired: true})
	p.client = p.ca.Issue(t, "client", rpcauthtest.Options{Client: true})
	p.otherCient = p.other.Issue(t, "other-client", rpcauthtest.Options{Client: true})
	p.token = filepath.Join(dir, "token")
	p.wrongToken = filepath.Join(dir, "wrong-token")
	for path, tok := range map[string]string{p.token: "0123456789abcdef0123456789abcdef", p.wrongToken: "0123456789abcdef0123456789abcdeX"} {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// startSecureServe runs toolsvc serve on listen ("" for a free loopback
// port) with the given security flags, waits until its health service
// answers over clientCfg's transport, and returns the address.
func startSecureServe(t testing.TB, root, listen string, clientCfg *rpcauth.ClientConfig, flags ...string) string {
	t.Helper()
	if listen == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listen = l.Addr().String()
		_ = l.Close()
	}
	cmd := exec.Command(toolsvcBin, append([]string{"serve", "--listen", listen, "--root", root, "--log-format", "text", "--grace", "1s"}, flags...)...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("toolsvc logs:\n%s", logs.String())
		}
	})
	if clientCfg == nil {
		waitListening(t, listen)
		return listen
	}
	opts, err := clientCfg.DialOptions(listen)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(listen, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, "toolwire.executor.v1.ExecutorService"); err != nil {
		t.Fatalf("toolsvc at %s not serving: %v", listen, err)
	}
	return listen
}

// waitListening waits until a TCP connection to addr succeeds, for a
// server no verifying client can reach (an expired certificate).
func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("toolsvc at %s not listening: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCallAuthentication runs `toolsvc call --addr` against real toolsvc
// servers with good and bad credentials. Each call asks Bash to create a
// marker file: it must exist after an accepted call and be absent after a
// refused one, whose exit status and message name the gRPC code.
func TestCallAuthentication(t *testing.T) {
	p := newTestPKI(t)
	root := sandboxtest.Dir(t)
	tlsFlags := []string{"--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile}
	trustCA := &rpcauth.ClientConfig{CAFile: p.ca.CertFile}
	servers := map[string]string{
		"tls":     startSecureServe(t, root, "", trustCA, tlsFlags...),
		"mtls":    startSecureServe(t, root, "", trustCA, append(tlsFlags, "--tls-client-ca", p.ca.CertFile)...),
		"token":   startSecureServe(t, root, "", trustCA, append(tlsFlags, "--token-file", p.token)...),
		"unix":    startSecureServe(t, root, "unix://"+filepath.Join(t.TempDir(), "toolsvc.sock"), &rpcauth.ClientConfig{}, "--token-file", p.token),
		"plain":   startSecureServe(t, root, "", &rpcauth.ClientConfig{Insecure: true}, "--insecure"),
		"expired": startSecureServe(t, root, "", nil, "--tls-cert", p.expiredServer.CertFile, "--tls-key", p.expiredServer.KeyFile),
	}
	clientCert := []string{"--tls-cert", p.client.CertFile, "--tls-key", p.client.KeyFile}
	tests := []struct {
		name   string
		server string
		args   []string
		want   string // gRPC code in the error; "" for success
		reason string // the refusal's reason, which the message names
	}{
		{"TLS", "tls", []string{"--tls-ca", p.ca.CertFile}, "", ""},
		{"mutual TLS", "mtls", append([]string{"--tls-ca", p.ca.CertFile}, clientCert...), "", ""},
		{"token over TLS", "token", []string{"--tls-ca", p.ca.CertFile, "--token-file", p.token}, "", ""},
		{"token over a unix socket", "unix", []string{"--token-file", p.token}, "", ""},

		{"wrong CA", "tls", []string{"--tls-ca", p.other.CertFile}, "Unavailable", ""},
		{"expired server certificate", "expired", []string{"--tls-ca", p.ca.CertFile}, "Unavailable", ""},
		{"plaintext client, TLS server", "tls", []string{"--insecure"}, "Unavailable", ""},
		{"TLS client, plaintext server", "plain", []string{"--tls-ca", p.ca.CertFile}, "Unavailable", ""},
		{"no client certificate", "mtls", []string{"--tls-ca", p.ca.CertFile}, "Unauthenticated", "(CLIENT_CERT_REQUIRED)"},
		{"client certificate from another CA", "mtls", []string{"--tls-ca", p.ca.CertFile, "--tls-cert", p.otherCient.CertFile, "--tls-key", p.otherCient.KeyFile}, "Unauthenticated", "(CLIENT_CERT_INVALID)"},
		{"missing token", "token", []string{"--tls-ca", p.ca.CertFile}, "Unauthenticated", "(TOKEN_MISSING)"},
		{"wrong token", "token", []string{"--tls-ca", p.ca.CertFile, "--token-file", p.wrongToken}, "Unauthenticated", "(TOKEN_INVALID)"},
		{"missing token over a unix socket", "unix", nil, "Unauthenticated", "(TOKEN_MISSING)"},
		{"wrong token over a unix socket", "unix", []string{"--token-file", p.wrongToken}, "Unauthenticated", "(TOKEN_INVALID)"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := fmt.Sprintf("marker-%d", i)
			in := fmt.Sprintf(`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"touch %s"}}`, marker)
			cmd := exec.Command(toolsvcBin, append([]string{"call", "--addr", servers[tt.server]}, tt.args...)...)
			cmd.Stdin = strings.NewReader(in)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			_, statErr := os.Stat(filepath.Join(root, marker))
			if tt.want == "" {
				if err != nil || statErr != nil || !strings.Contains(stdout.String(), `"tool_use_id": "t"`) {
					t.Fatalf("call failed: %v, marker: %v\nstdout: %s\nstderr: %s", err, statErr, stdout.String(), stderr.String())
				}
				return
			}
			if err == nil || !strings.Contains(stderr.String(), "code = "+tt.want) || !strings.Contains(stderr.String(), tt.reason) {
				t.Fatalf("got %v, want a refusal with code %s %s\nstdout: %s\nstderr: %s", err, tt.want, tt.reason, stdout.String(), stderr.String())
			}
			if statErr == nil {
				t.Fatalf("the refused call ran: %s exists", marker)
			}
		})
	}
}

// TestServeRefusesPlaintextTCP checks that toolsvc will not serve plaintext
// on TCP unless told to, and says what to pass.
func TestServeRefusesPlaintextTCP(t *testing.T) {
	out, err := exec.Command(toolsvcBin, "serve", "--listen", "127.0.0.1:0", "--root", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-cert") || !strings.Contains(string(out), "--insecure") {
		t.Fatalf("toolsvc served plaintext TCP or did not say what to pass: %v\n%s", err, out)
	}
	cmd := exec.Command(toolsvcBin, "call", "--addr", "127.0.0.1:1")
	cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"true"}}`)
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-ca") || !strings.Contains(string(out), "--insecure") {
		t.Fatalf("toolsvc call dialled plaintext TCP or did not say what to pass: %v\n%s", err, out)
	}
}

// BenchmarkToolCallTLS measures one Read of a small file through a real
// toolsvc Execute stream over plaintext, TLS and mutual TLS. "call" reuses
// one stream for every call; "connect+call" opens a new connection (and
// TLS handshake) and stream per call.
func BenchmarkToolCallTLS(b *testing.B) {
	p := newTestPKI(b)
	root := sandboxtest.Dir(b)
	if err := os.WriteFile(filepath.Join(root, "small.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	tlsFlags := []string{"--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile}
	for _, tc := range []struct {
		name   string
		flags  []string
		client *rpcauth.ClientConfig
	}{
		{"plaintext", []string{"--insecure"}, &rpcauth.ClientConfig{Insecure: true}},
		{"tls", tlsFlags, &rpcauth.ClientConfig{CAFile: p.ca.CertFile}},
		{"mtls", append(tlsFlags, "--tls-client-ca", p.ca.CertFile), &rpcauth.ClientConfig{CAFile: p.ca.CertFile, CertFile: p.client.CertFile, KeyFile: p.client.KeyFile}},
	} {
		addr := startSecureServe(b, root, "", tc.client, tc.flags...)
		opts, err := tc.client.DialOptions(addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/call", func(b *testing.B) {
			conn, err := grpc.NewClient(addr, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			s := openSession(b, conn)
			defer s.close()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s.read(b, fmt.Sprintf("r%d", i))
			}
		})
		b.Run(tc.name+"/connect+call", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				conn, err := grpc.NewClient(addr, opts...)
				if err != nil {
					b.Fatal(err)
				}
				s := openSession(b, conn)
				s.read(b, fmt.Sprintf("c%d", i))
				s.close()
				_ = conn.Close()
			}
		})
	}
}

// benchSession is an open Execute stream.
type benchSession struct {
	stream executorv1.ExecutorService_ExecuteClient
	cancel context.CancelFunc
}

func openSession(b testing.TB, conn *grpc.ClientConn) *benchSession {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := executorv1.NewExecutorServiceClient(conn).Execute(ctx)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	open := &executorv1.Open{ClientName: "bench", Options: &executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION}}
	if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: open}}); err != nil {
		cancel()
		b.Fatal(err)
	}
	return &benchSession{stream: stream, cancel: cancel}
}

// read sends one Read call and waits for its result.
func (s *benchSession) read(b testing.TB, id string) {
	use := &executorv1.ToolUse{Id: id, Name: "Read", InputJson: `{"file_path":"small.txt"}`, AssistantMessageId: "msg_" + id}
	if err := s.stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: use}}); err != nil {
		b.Fatal(err)
	}
	for {
		ev, err := s.stream.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if r := ev.GetResult(); r != nil && r.GetToolUseId() == id {
			return
		}
	}
}

func (s *benchSession) close() {
	_ = s.stream.CloseSend()
	for {
		if _, err := s.stream.Recv(); err != nil {
			break
		}
	}
	s.cancel()
}
