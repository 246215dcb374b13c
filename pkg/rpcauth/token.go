package rpcauth

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
)

// MinTokenBytes is the shortest bearer token accepted: anything shorter is
// guessable. `openssl rand -hex 32` makes a good one.
const MinTokenBytes = 16

// TokenEnv is the environment variable a server (and an unprefixed client)
// reads its bearer token from when no token file is given.
const TokenEnv = "TOOLWIRE_TOKEN"

// clientTokenEnv is the token variable of a client whose flags carry
// prefix: "executor-" reads TOOLWIRE_EXECUTOR_TOKEN.
func clientTokenEnv(prefix string) string {
	return "TOOLWIRE_" + strings.ToUpper(strings.ReplaceAll(prefix, "-", "_")) + "TOKEN"
}

// loadToken returns the token of file, or else of the environment variable
// env, or "" when neither is set. Surrounding white space is dropped.
func loadToken(file, env string, getenv func(string) string) (string, error) {
	var tok []byte
	var from string
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read token file: %w", err)
		}
		tok, from = bytes.TrimSpace(b), file
	case env != "":
		if getenv == nil {
			getenv = os.Getenv
		}
		tok, from = []byte(strings.TrimSpace(getenv(env))), "$"+env
		if len(tok) == 0 {
			return "", nil
		}
	default:
		return "", nil
	}
	if len(tok) < MinTokenBytes {
		return "", fmt.Errorf("token from %s is %d bytes; use at least %d (e.g. openssl rand -hex 32)", from, len(tok), MinTokenBytes)
	}
	if bytes.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("token from %s spans several lines", from)
	}
	return string(tok), nil
}

// bearer sends a token as "authorization: Bearer <token>" on every RPC.
type bearer struct {
	token string
	// secure makes gRPC refuse to send the token over a connection
	// without transport security.
	secure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (b bearer) RequireTransportSecurity() bool { return b.secure }
