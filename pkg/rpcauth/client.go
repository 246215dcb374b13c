package rpcauth

import (
	"crypto/tls"
	"flag"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// ClientConfig says how a client secures its connection. Its fields are
// the values of the flags RegisterClientFlags adds.
type ClientConfig struct {
	CAFile     string // --tls-ca: CA(s) the server certificate must chain to
	CertFile   string // --tls-cert: client certificate, for mutual TLS
	KeyFile    string // --tls-key: its private key
	ServerName string // --tls-server-name: name to verify instead of the target's host
	TokenFile  string // --token-file: file holding the bearer token to send
	Insecure   bool   // --insecure: connect to a TCP address in plaintext

	// Prefix is the flag prefix, used in error messages.
	Prefix string
	// TokenEnv names the environment variable read for the token when
	// TokenFile is empty; "" reads none.
	TokenEnv string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// RegisterClientFlags adds the client security flags to fs, each name
// starting with prefix ("" or e.g. "executor-"), and returns the config
// they fill. The token may also come from $TOOLWIRE_<PREFIX>TOKEN.
func RegisterClientFlags(fs *flag.FlagSet, prefix string) *ClientConfig {
	c := &ClientConfig{Prefix: prefix, TokenEnv: clientTokenEnv(prefix)}
	fs.StringVar(&c.CAFile, prefix+"tls-ca", "", "PEM CA certificate(s) the server's certificate must chain to; connects with TLS")
	fs.StringVar(&c.CertFile, prefix+"tls-cert", "", "PEM client certificate for mutual TLS (with --"+prefix+"tls-key); connects with TLS")
	fs.StringVar(&c.KeyFile, prefix+"tls-key", "", "PEM private key of --"+prefix+"tls-cert")
	fs.StringVar(&c.ServerName, prefix+"tls-server-name", "", "name the server certificate must carry (default: the host of the address)")
	fs.StringVar(&c.TokenFile, prefix+"token-file", "", "file holding the bearer token to send (default: $"+c.TokenEnv+" if set)")
	fs.BoolVar(&c.Insecure, prefix+"insecure", false, "connect to a TCP address in plaintext (no TLS); unix sockets never need it")
	return c
}

// DialOptions returns the transport and per-RPC credentials for target
// (a unix address or a TCP one, with or without a resolver scheme).
// Plaintext TCP without Insecure is an error that says what to pass.
func (c *ClientConfig) DialOptions(target string) ([]grpc.DialOption, error) {
	p := "--" + c.Prefix
	_, unix := rpcserver.UnixPath(target)
	useTLS := c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
	switch {
	case useTLS && c.Insecure:
		return nil, fmt.Errorf("%sinsecure and %stls-* contradict each other: give one", p, p)
	case !useTLS && !unix && !c.Insecure:
		return nil, fmt.Errorf("refusing to connect to %s in plaintext: pass %stls-ca (and %stls-cert, %stls-key for mutual TLS), or %sinsecure",
			target, p, p, p, p)
	}
	var opts []grpc.DialOption
	if useTLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: c.ServerName}
		if c.CAFile != "" {
			pool, err := loadPool(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%stls-ca: %w", p, err)
			}
			cfg.RootCAs = pool
		}
		if c.CertFile != "" || c.KeyFile != "" {
			cert, err := loadKeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%stls-cert/%stls-key: %w", p, p, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	tok, err := loadToken(c.TokenFile, c.TokenEnv, c.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%stoken-file: %w", p, err)
	}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: tok, secure: useTLS}))
	}
	return opts, nil
}
