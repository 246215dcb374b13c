package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoCommand is the hidden subcommand that makes toolbench the bare gRPC
// server of the floors.
const echoCommand = "echo-server"

// Sizes of the floors, matching what the peers move.
const (
	pingBytes   = 1 << 10  // one ping-pong message, each way
	streamChunk = 64 << 10 // one message of the stream floor
	streamBytes = 64 << 20 // bytes per stream, floor and Bash alike
)

// echoService is a gRPC service with no framework around it: Ping echoes
// every message of a bidi stream, Flood answers one Int64Value with that many
// bytes in streamChunk messages.
var echoService = grpc.ServiceDesc{
	ServiceName: "toolbench.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Ping", ServerStreams: true, ClientStreams: true, Handler: servePing},
		{StreamName: "Flood", ServerStreams: true, Handler: serveFlood},
	},
}

func servePing(_ any, stream grpc.ServerStream) error {
	for {
		m := new(wrapperspb.BytesValue)
		if err := stream.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := stream.SendMsg(m); err != nil {
			return err
		}
	}
}

func serveFlood(_ any, stream grpc.ServerStream) error {
	want := new(wrapperspb.Int64Value)
	if err := stream.RecvMsg(want); err != nil {
		return err
	}
	chunk := &wrapperspb.BytesValue{Value: make([]byte, streamChunk)}
	for sent := int64(0); sent < want.GetValue(); sent += streamChunk {
		if err := stream.SendMsg(chunk); err != nil {
			return err
		}
	}
	return nil
}

// runEchoServer serves echoService on a free loopback port, prints
// "listening ADDR" on stdout, and stops on SIGTERM or SIGINT.
func runEchoServer() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&echoService, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Printf("listening %s\n", lis.Addr())
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	srv.Stop()
	return nil
}

// pingStream is an open Ping stream of the echo server.
type pingStream struct {
	stream grpc.ClientStream
	msg    *wrapperspb.BytesValue
	cancel context.CancelFunc
}

func openPing(ctx context.Context, conn *grpc.ClientConn) (*pingStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := conn.NewStream(ctx, &echoService.Streams[0], "/toolbench.Echo/Ping")
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open ping stream: %w", err)
	}
	return &pingStream{stream: s, msg: &wrapperspb.BytesValue{Value: make([]byte, pingBytes)}, cancel: cancel}, nil
}

// roundTrip sends one 1 KiB message and waits for its echo.
func (p *pingStream) roundTrip() (time.Duration, error) {
	start := time.Now()
	if err := p.stream.SendMsg(p.msg); err != nil {
		return 0, fmt.Errorf("ping: %w", err)
	}
	got := new(wrapperspb.BytesValue)
	if err := p.stream.RecvMsg(got); err != nil {
		return 0, fmt.Errorf("pong: %w", err)
	}
	took := time.Since(start)
	if len(got.GetValue()) != pingBytes {
		return 0, fmt.Errorf("pong of %d bytes, want %d", len(got.GetValue()), pingBytes)
	}
	return took, nil
}

func (p *pingStream) close() {
	_ = p.stream.CloseSend()
	p.cancel()
}

// floodOnce receives streamBytes from a new Flood stream and returns the
// time from opening the stream to its end.
func floodOnce(ctx context.Context, conn *grpc.ClientConn) (time.Duration, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	s, err := conn.NewStream(ctx, &echoService.Streams[1], "/toolbench.Echo/Flood")
	if err != nil {
		return 0, 0, fmt.Errorf("open flood stream: %w", err)
	}
	if err := s.SendMsg(wrapperspb.Int64(streamBytes)); err != nil {
		return 0, 0, fmt.Errorf("ask for flood: %w", err)
	}
	if err := s.CloseSend(); err != nil {
		return 0, 0, fmt.Errorf("close send: %w", err)
	}
	var got int64
	m := new(wrapperspb.BytesValue)
	for {
		err := s.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("flood: %w", err)
		}
		got += int64(len(m.GetValue()))
	}
	took := time.Since(start)
	if got != streamBytes {
		return 0, 0, fmt.Errorf("flood carried %d bytes, want %d", got, streamBytes)
	}
	return took, got, nil
}

// spawnBashTrue runs `bash -c true` with os/exec, stdout and stderr captured
// as a tool's would be: the floor of a Bash call.
func spawnBashTrue(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "/bin/bash", "-c", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("bash -c true: %w (output %q)", err, out)
	}
	return nil
}

// timeBashTrue times one spawnBashTrue.
func timeBashTrue(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := spawnBashTrue(ctx)
	return time.Since(start), err
}

// timeBashTrueN starts n spawnBashTrue at once and returns the time until
// the last has ended.
func timeBashTrueN(ctx context.Context, n int) (time.Duration, error) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() { errs[i] = spawnBashTrue(ctx) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// headOnce runs the stream figure's command, `head -c streamBytes
// /dev/zero`, with os/exec and reads its stdout through a pipe in 256 KiB
// reads: what producing and reading the output costs before any of it is
// sent anywhere.
func headOnce(ctx context.Context) (time.Duration, int64, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", fmt.Sprintf("head -c %d /dev/zero", streamBytes))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("start head: %w", err)
	}
	var got int64
	buf := make([]byte, 256<<10)
	for {
		n, err := out.Read(buf)
		got += int64(n)
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("head: %w", err)
	}
	took := time.Since(start)
	if got != streamBytes {
		return 0, 0, fmt.Errorf("head wrote %d bytes, want %d", got, streamBytes)
	}
	return took, got, nil
}
