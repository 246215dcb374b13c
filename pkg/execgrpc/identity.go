package execgrpc

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// clientIdentity is who opens a session, as the connection shows it, for
// the executor's sessions-per-client bound: the subject of a client
// certificate (mutual TLS), else the peer's IP address, else "local" for
// a unix socket or an in-process connection.
func clientIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "local"
	}
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		if cn := info.State.PeerCertificates[0].Subject.CommonName; cn != "" {
			return "cert:" + cn
		}
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return "ip:" + a.IP.String()
	}
	return "local"
}
