package rpcserver_test

import (
	"context"
	"flag"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolwire/toolwire/pkg/rpcserver"
)

func TestTransportFlags(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tr := rpcserver.RegisterTransportFlags(fs, "executor-", "to a test")
	if *tr != rpcserver.DefaultTransport {
		t.Errorf("defaults %+v, want %+v", *tr, rpcserver.DefaultTransport)
	}
	if err := fs.Parse([]string{"--executor-grpc-stream-window", "8MiB", "--executor-grpc-conn-window", "65536",
		"--executor-grpc-read-buffer", "0", "--executor-grpc-write-buffer", "64KiB"}); err != nil {
		t.Fatal(err)
	}
	want := rpcserver.Transport{StreamWindow: 8 << 20, ConnWindow: 64 << 10, ReadBuffer: 0, WriteBuffer: 64 << 10, ReuseBuffers: true}
	if *tr != want {
		t.Errorf("parsed %+v, want %+v", *tr, want)
	}
	if err := tr.Validate(); err != nil {
		t.Errorf("Validate(%+v): %v", *tr, err)
	}
	if got := fs.Lookup("executor-grpc-stream-window").Value.String(); got != "8MiB" {
		t.Errorf("flag prints as %q, want 8MiB", got)
	}
	for _, bad := range []string{"4 MB", "-1", "1.5MiB", "3GiB", "x"} {
		if err := fs.Set("executor-grpc-stream-window", bad); err == nil {
			t.Errorf("size %q accepted", bad)
		}
	}
	for _, bad := range []rpcserver.Transport{{StreamWindow: 1024}, {ConnWindow: 65535}, {ReadBuffer: -1}, {WriteBuffer: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", bad)
		}
	}
	if err := (rpcserver.Transport{}).Validate(); err != nil {
		t.Errorf("gRPC's defaults: %v", err)
	}
}

// TestTransportWindows checks that both ends really use the windows: each
// side sends 3 MiB that the other does not read, which fits in a 4 MiB
// window but would stop after 64 KiB with gRPC's default one.
func TestTransportWindows(t *testing.T) {
	const total, chunk = 3 << 20, 256 << 10
	sent := make(chan error, 1)
	srv := rpcserver.New(nil, grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		msg := wrapperspb.Bytes(make([]byte, chunk))
		for range total / chunk {
			if err := stream.SendMsg(msg); err != nil {
				sent <- err
				return err
			}
		}
		sent <- nil
		<-stream.Context().Done() // read nothing until the client goes
		return nil
	}))
	conn := dialServed(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Bulk/Both")
	if err != nil {
		t.Fatal(err)
	}
	// The client's sends complete although the server reads nothing:
	// the server's window took them.
	msg := wrapperspb.Bytes(make([]byte, chunk))
	for i := range total / chunk {
		if err := stream.SendMsg(msg); err != nil {
			t.Fatalf("client send %d: %v", i, err)
		}
	}
	// The server's sends complete although the client reads nothing: the
	// client's window took them.
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("server send: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the server could not send 3 MiB to a client that reads nothing: the client's window is not 4 MiB")
	}
	got := 0
	for got < total {
		m := new(wrapperspb.BytesValue)
		if err := stream.RecvMsg(m); err != nil {
			t.Fatalf("receive after %d bytes: %v", got, err)
		}
		got += len(m.GetValue())
	}
	cancel()
}

// dialServed serves srv on a loopback TCP port and returns a connection to
// it with DefaultTransport's options; both end with the test.
func dialServed(t *testing.T, srv *rpcserver.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	conn, err := grpc.NewClient(lis.Addr().String(), append(rpcserver.DefaultTransport.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
