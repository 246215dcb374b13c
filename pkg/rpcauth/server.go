package rpcauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// healthService is left open to unauthenticated peers (see the package doc).
const healthService = "grpc.health.v1.Health"

// ServerConfig says how a server secures its listener. Its fields are the
// values of the flags RegisterServerFlags adds.
type ServerConfig struct {
	CertFile     string // --tls-cert: PEM certificate (chain) of the server
	KeyFile      string // --tls-key: its private key
	ClientCAFile string // --tls-client-ca: CA(s) client certificates must chain to (mutual TLS)
	TokenFile    string // --token-file: file holding the bearer token clients must send
	Insecure     bool   // --insecure: allow plaintext on a TCP listener

	// TokenEnv names the environment variable read for the token when
	// TokenFile is empty; "" reads none.
	TokenEnv string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// RegisterServerFlags adds the server security flags to fs and returns the
// config they fill. The token may also come from $TOOLWIRE_TOKEN.
func RegisterServerFlags(fs *flag.FlagSet) *ServerConfig {
	c := &ServerConfig{TokenEnv: TokenEnv}
	fs.StringVar(&c.CertFile, "tls-cert", "", "PEM certificate of this server; serves TLS (with --tls-key)")
	fs.StringVar(&c.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.ClientCAFile, "tls-client-ca", "", "PEM CA certificate(s): require clients to present a certificate signed by it (mutual TLS)")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding the bearer token every client must send (default: $"+TokenEnv+" if set)")
	fs.BoolVar(&c.Insecure, "insecure", false, "serve plaintext on a TCP address (no TLS); unix sockets never need it")
	return c
}

// ServerOptions returns the transport credentials and auth interceptors of
// a server listening on listenAddr ("host:port" or a unix address). A TCP
// address with neither TLS nor Insecure is an error that says what to pass.
func (c *ServerConfig) ServerOptions(listenAddr string) ([]grpc.ServerOption, error) {
	_, unix := rpcserver.UnixPath(listenAddr)
	useTLS := c.CertFile != "" || c.KeyFile != ""
	switch {
	case useTLS && c.Insecure:
		return nil, errors.New("--insecure and --tls-cert/--tls-key contradict each other: give one")
	case c.ClientCAFile != "" && !useTLS:
		return nil, errors.New("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key too")
	case !useTLS && !unix && !c.Insecure:
		return nil, fmt.Errorf("refusing to serve plaintext on TCP address %s: pass --tls-cert and --tls-key "+
			"(and --tls-client-ca for mutual TLS), or --insecure to serve without encryption, or listen on a unix socket", listenAddr)
	}
	a := &authenticator{}
	var opts []grpc.ServerOption
	if useTLS {
		cert, err := loadKeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
		if c.ClientCAFile != "" {
			if a.clientCAs, err = loadPool(c.ClientCAFile); err != nil {
				return nil, fmt.Errorf("--tls-client-ca: %w", err)
			}
			// Ask for the certificate in the handshake; the interceptor
			// verifies it so a refused peer learns why.
			cfg.ClientAuth = tls.RequestClientCert
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	tok, err := loadToken(c.TokenFile, c.TokenEnv, c.Getenv)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	if tok != "" {
		sum := sha256.Sum256([]byte(tok))
		a.tokenSum = sum[:]
	}
	if a.clientCAs == nil && a.tokenSum == nil {
		return opts, nil
	}
	guarded := selector.MatchFunc(func(_ context.Context, m interceptors.CallMeta) bool { return m.Service != healthService })
	return append(opts,
		grpc.ChainUnaryInterceptor(selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(a.authenticate), guarded)),
		grpc.ChainStreamInterceptor(selector.StreamServerInterceptor(auth.StreamServerInterceptor(a.authenticate), guarded)),
	), nil
}

// authenticator checks the client certificate and bearer token of an RPC.
type authenticator struct {
	clientCAs *x509.CertPool // nil: no client certificate required
	tokenSum  []byte         // SHA-256 of the token; nil: no token required
}

// authenticate is the auth.AuthFunc of the server: it returns an
// Unauthenticated status unless every configured check passes.
func (a *authenticator) authenticate(ctx context.Context) (context.Context, error) {
	if a.clientCAs != nil {
		if err := a.verifyPeer(ctx); err != nil {
			return nil, err
		}
	}
	if a.tokenSum != nil {
		if len(metadata.ValueFromIncomingContext(ctx, "authorization")) == 0 {
			return nil, rpcerr.Error(codes.Unauthenticated, rpcerr.TokenMissing, "a bearer token is required")
		}
		got, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, rpcerr.Error(codes.Unauthenticated, rpcerr.TokenInvalid, "invalid authorization header: "+status.Convert(err).Message())
		}
		// Hashing first makes the comparison constant-time in the
		// length of the token too.
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], a.tokenSum) != 1 {
			return nil, rpcerr.Error(codes.Unauthenticated, rpcerr.TokenInvalid, "invalid bearer token")
		}
	}
	return ctx, nil
}

// verifyPeer checks that the connection carries a client certificate that
// chains to the client CA and is valid now for client authentication.
func (a *authenticator) verifyPeer(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return rpcerr.Error(codes.Unauthenticated, rpcerr.ClientCertRequired, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return rpcerr.Error(codes.Unauthenticated, rpcerr.ClientCertRequired, "a TLS connection with a client certificate is required")
	}
	certs := info.State.PeerCertificates
	if len(certs) == 0 {
		return rpcerr.Error(codes.Unauthenticated, rpcerr.ClientCertRequired, "a client certificate is required")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		Roots: a.clientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return rpcerr.Error(codes.Unauthenticated, rpcerr.ClientCertInvalid,
			fmt.Sprintf("client certificate %q refused: %s", certs[0].Subject.CommonName, firstLine(err.Error())),
			"subject", certs[0].Subject.CommonName)
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
