package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/toolwire/toolwire/pkg/rpcserver"
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

// transport is how the echo server and its clients set up HTTP/2 and the
// command's pipe. The untuned transport is gRPC's defaults and a pipe of
// the kernel's default size read in streamChunk pieces; the tuned one is
// what a careful engineer sets for bulk output on loopback.
type transport struct {
	tuned bool
	// Transport's windows and buffers, as toolwire's servers and clients
	// set them; zero fields are gRPC's defaults (a dynamic,
	// BDP-estimated window; 32 KiB buffers).
	rpcserver.Transport
	pipeSize int // F_SETPIPE_SZ of the command's stdout; 0: the kernel's default (64 KiB)
	chunk    int // bytes per message of Flood, and per pipe read of ExecFlood
}

var (
	untuned = transport{chunk: streamChunk}
	tuned   = transport{tuned: true, Transport: rpcserver.Transport{StreamWindow: 4 << 20, ConnWindow: 16 << 20,
		ReadBuffer: 256 << 10, WriteBuffer: 256 << 10, ReuseBuffers: true}, pipeSize: 1 << 20, chunk: 256 << 10}
)

// setPipeSize resizes the pipe f to t.pipeSize, if t asks for a size.
func (t transport) setPipeSize(f *os.File) error {
	if t.pipeSize == 0 {
		return nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		_, serr = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, t.pipeSize)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("F_SETPIPE_SZ %d: %w", t.pipeSize, serr)
	}
	return nil
}

// echoService is a gRPC service with no framework around it. Ping echoes
// every message of a bidi stream, Flood answers one Int64Value with that many
// bytes in streamChunk messages: the floors. ReadFile, ExecFlood and
// ExecFloodSaved are the references, the least a Read and a Bash stream can
// do with no executor around them: ReadFile answers each path with the
// file's lines, numbered; ExecFlood runs `head -c N /dev/zero` and sends its
// stdout as it is read; ExecFloodSaved also writes every byte to a file
// before sending it, as a Bash call keeps its whole output for the model to
// read. Abort is the least an abort can cost: it starts `sleep 30` when
// asked and kills it when told to.
//
// The service's implementation value is the server's transport: Flood and
// ExecFlood size their messages, pipe and reads by it.
var echoService = grpc.ServiceDesc{
	ServiceName: "toolbench.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Ping", ServerStreams: true, ClientStreams: true, Handler: servePing},
		{StreamName: "Flood", ServerStreams: true, Handler: serveFlood},
		{StreamName: "ReadFile", ServerStreams: true, ClientStreams: true, Handler: serveReadFile},
		{StreamName: "ExecFlood", ServerStreams: true, Handler: serveExecFlood},
		{StreamName: "ExecFloodSaved", ServerStreams: true, Handler: serveExecFloodSaved},
		{StreamName: "Abort", ServerStreams: true, ClientStreams: true, Handler: serveAbort},
	},
}

// Methods of echoService, indexes into its Streams.
const (
	methodPing = iota
	methodFlood
	methodReadFile
	methodExecFlood
	methodExecFloodSaved
	methodAbort
)

// methodName is the full gRPC method name of echoService's stream i.
func methodName(i int) string {
	return "/" + echoService.ServiceName + "/" + echoService.Streams[i].StreamName
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

// serverTransport is the transport the echo service was registered with.
func serverTransport(srv any) transport {
	if t, ok := srv.(transport); ok {
		return t
	}
	return untuned
}

func serveFlood(srv any, stream grpc.ServerStream) error {
	t := serverTransport(srv)
	want := new(wrapperspb.Int64Value)
	if err := stream.RecvMsg(want); err != nil {
		return err
	}
	chunk := &wrapperspb.BytesValue{Value: make([]byte, t.chunk)}
	for sent := int64(0); sent < want.GetValue(); sent += int64(t.chunk) {
		if err := stream.SendMsg(chunk); err != nil {
			return err
		}
	}
	return nil
}

// serveReadFile answers every path with the file's text, each line
// prefixed with its number and a tab, after checking that it holds no NUL:
// what Read does for a small text file, and nothing else, in the fewest
// system calls (open, fstat, one read, close).
func serveReadFile(_ any, stream grpc.ServerStream) error {
	for {
		path := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(path); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		data, err := readSmallFile(path.GetValue())
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return fmt.Errorf("%s is binary", path.GetValue())
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		out := make([]byte, 0, len(data)+8*len(lines))
		for i, l := range lines {
			if i > 0 {
				out = append(out, '\n')
			}
			out = strconv.AppendInt(out, int64(i+1), 10)
			out = append(out, '\t')
			out = append(out, l...)
		}
		if err := stream.SendMsg(wrapperspb.String(string(out))); err != nil {
			return err
		}
	}
}

// readSmallFile reads a regular file with raw system calls: no os.File,
// so no poller registration, and a single read when the file is no larger
// than fstat said.
func readSmallFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	buf := make([]byte, st.Size+1)
	n := 0
	for {
		k, err := syscall.Read(fd, buf[n:])
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		n += k
		if k == 0 || n < len(buf) {
			return buf[:n], nil // a short read of a regular file is its end
		}
		buf = append(buf, make([]byte, len(buf))...)
	}
}

// serveExecFlood runs `head -c N /dev/zero` for the N it is sent and sends
// the command's stdout as it is read from the pipe, in reads of up to the
// transport's chunk (after resizing the pipe when the transport is tuned):
// what a Bash stream must do for every byte, without keeping the output or
// counting its lines.
func serveExecFlood(srv any, stream grpc.ServerStream) error {
	return execFlood(srv, stream, nil)
}

// savedBytesKey is the trailer in which ExecFloodSaved reports how many
// bytes it wrote to its file.
const savedBytesKey = "saved-bytes"

// serveExecFloodSaved is serveExecFlood that also writes every byte to a
// file in the server's TMPDIR before sending it: what a Bash stream must
// do for every byte when the whole output is kept for the model to read,
// as Claude Code keeps an output too long for its result. The file is
// removed when the stream ends; the trailer says how much it held.
func serveExecFloodSaved(srv any, stream grpc.ServerStream) error {
	f, err := os.CreateTemp("", "toolbench-saved-*")
	if err != nil {
		return fmt.Errorf("create saved output: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	err = execFlood(srv, stream, f)
	if st, serr := f.Stat(); serr == nil {
		stream.SetTrailer(metadata.Pairs(savedBytesKey, strconv.FormatInt(st.Size(), 10)))
	}
	return err
}

// execFlood runs `head -c N /dev/zero` for the N it is sent and sends its
// stdout as it is read, writing each read to save first when save is not
// nil.
func execFlood(srv any, stream grpc.ServerStream, save *os.File) error {
	t := serverTransport(srv)
	want := new(wrapperspb.Int64Value)
	if err := stream.RecvMsg(want); err != nil {
		return err
	}
	cmd := exec.CommandContext(stream.Context(), "/bin/bash", "-c", fmt.Sprintf("head -c %d /dev/zero", want.GetValue()))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := t.setPipeSize(out.(*os.File)); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start head: %w", err)
	}
	buf := make([]byte, t.chunk)
	msg := new(wrapperspb.BytesValue)
	var sendErr error
	for sendErr == nil {
		n, err := out.Read(buf)
		if n > 0 {
			if save != nil {
				if _, werr := save.Write(buf[:n]); werr != nil {
					sendErr = fmt.Errorf("save output: %w", werr)
					break
				}
			}
			msg.Value = buf[:n]
			sendErr = stream.SendMsg(msg) // marshalled before it returns
		}
		if err != nil {
			break
		}
	}
	if sendErr != nil {
		_ = out.Close() // head gets EPIPE instead of blocking on a full pipe
		_ = cmd.Wait()
		return sendErr
	}
	return cmd.Wait()
}

// Messages of the Abort stream: the client sends abortStart and gets
// abortStarted and the process id, then sends abortKill and gets
// abortKilled.
const (
	abortStart   = "start"
	abortStarted = "started "
	abortKill    = "abort"
	abortKilled  = "aborted"
)

// serveAbort starts `bash -c 'sleep 30'` (bash runs sleep in its own
// process) with its output going to a pipe it reads, as a tool's would,
// for each abortStart, and answers with its pid once started. On abortKill
// it sends the process SIGKILL and answers at once; a goroutine reaps it.
// That is all an executor must do between an abort and its result, and
// what toolsvc does too: it answers once its kill is sent, without waiting
// for the reaping.
func serveAbort(_ any, stream grpc.ServerStream) error {
	var running *os.Process
	defer func() {
		if running != nil {
			_ = running.Kill()
		}
	}()
	for {
		m := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var answer string
		switch {
		case m.GetValue() == abortStart && running == nil:
			p, err := startSleep()
			if err != nil {
				return err
			}
			running, answer = p, abortStarted+strconv.Itoa(p.Pid)
		case m.GetValue() == abortKill && running != nil:
			if err := running.Kill(); err != nil {
				return fmt.Errorf("kill sleep: %w", err)
			}
			running, answer = nil, abortKilled
		default:
			return fmt.Errorf("abort stream: unexpected %q (a process running: %v)", m.GetValue(), running != nil)
		}
		if err := stream.SendMsg(wrapperspb.String(answer)); err != nil {
			return err
		}
	}
}

// startSleep starts `bash -c 'sleep 30'` in the server's TMPDIR, with
// stdout and stderr on a pipe that a goroutine reads to its end, and reaps
// the process in another. The process dies with the server.
func startSleep() (*os.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/bash", "-c", "sleep 30")
	cmd.Dir = os.TempDir()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start sleep: %w", err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, r)
		r.Close()
	}()
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

// runEchoServer serves echoService twice on free loopback ports, with the
// untuned and the tuned transport, prints "listening ADDR TUNED-ADDR" on
// stdout, and stops on SIGTERM or SIGINT.
func runEchoServer() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 2)
	var addrs []string
	for _, t := range []transport{untuned, tuned} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		srv := grpc.NewServer(t.ServerOptions()...)
		srv.RegisterService(&echoService, t)
		go func() { served <- srv.Serve(lis) }()
		defer srv.Stop()
		addrs = append(addrs, lis.Addr().String())
	}
	fmt.Printf("listening %s\n", strings.Join(addrs, " "))
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return nil
}

// bidiStream is an open bidi stream of the echo server, on which every
// message sent is answered by one message.
type bidiStream struct {
	stream grpc.ClientStream
	cancel context.CancelFunc
}

func openBidi(ctx context.Context, conn *grpc.ClientConn, method int) (*bidiStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := conn.NewStream(ctx, &echoService.Streams[method], methodName(method))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open %s stream: %w", methodName(method), err)
	}
	return &bidiStream{stream: s, cancel: cancel}, nil
}

// exchange sends req, receives the answer into resp and returns the time
// both took.
func (b *bidiStream) exchange(req, resp any) (time.Duration, error) {
	start := time.Now()
	if err := b.stream.SendMsg(req); err != nil {
		return 0, fmt.Errorf("send: %w", err)
	}
	if err := b.stream.RecvMsg(resp); err != nil {
		return 0, fmt.Errorf("receive: %w", err)
	}
	return time.Since(start), nil
}

func (b *bidiStream) close() {
	_ = b.stream.CloseSend()
	b.cancel()
}

// pingStream is an open Ping stream of the echo server.
type pingStream struct {
	*bidiStream
	msg *wrapperspb.BytesValue
}

func openPing(ctx context.Context, conn *grpc.ClientConn) (*pingStream, error) {
	b, err := openBidi(ctx, conn, methodPing)
	if err != nil {
		return nil, err
	}
	return &pingStream{bidiStream: b, msg: &wrapperspb.BytesValue{Value: make([]byte, pingBytes)}}, nil
}

// roundTrip sends one 1 KiB message and waits for its echo.
func (p *pingStream) roundTrip() (time.Duration, error) {
	got := new(wrapperspb.BytesValue)
	took, err := p.exchange(p.msg, got)
	if err != nil {
		return 0, fmt.Errorf("ping: %w", err)
	}
	if len(got.GetValue()) != pingBytes {
		return 0, fmt.Errorf("pong of %d bytes, want %d", len(got.GetValue()), pingBytes)
	}
	return took, nil
}

// readFileStream is an open ReadFile stream of the echo server.
type readFileStream struct {
	*bidiStream
	path *wrapperspb.StringValue
}

func openReadFile(ctx context.Context, conn *grpc.ClientConn, path string) (*readFileStream, error) {
	b, err := openBidi(ctx, conn, methodReadFile)
	if err != nil {
		return nil, err
	}
	return &readFileStream{bidiStream: b, path: wrapperspb.String(path)}, nil
}

// roundTrip sends the path and waits for the numbered text.
func (r *readFileStream) roundTrip() (time.Duration, error) {
	got := new(wrapperspb.StringValue)
	took, err := r.exchange(r.path, got)
	if err != nil {
		return 0, fmt.Errorf("read file: %w", err)
	}
	if len(got.GetValue()) < 1024 {
		return 0, fmt.Errorf("read-file answered %d bytes, want the 1 KiB file numbered: %.100q", len(got.GetValue()), got.GetValue())
	}
	return took, nil
}

// abortStream is an open Abort stream of the echo server.
type abortStream struct{ *bidiStream }

func openAbort(ctx context.Context, conn *grpc.ClientConn) (*abortStream, error) {
	b, err := openBidi(ctx, conn, methodAbort)
	if err != nil {
		return nil, err
	}
	return &abortStream{b}, nil
}

// abortOnce has the server, process serverPid, start `sleep 30`, waits
// until sleep runs below it, found in /proc as the toolsvc figure finds
// its sleep (so that both wait alike before the abort, and their servers
// sit idle as long), and times the abort to its answer.
func (a *abortStream) abortOnce(ctx context.Context, serverPid int) (time.Duration, error) {
	got := new(wrapperspb.StringValue)
	if _, err := a.exchange(wrapperspb.String(abortStart), got); err != nil {
		return 0, fmt.Errorf("start sleep: %w", err)
	}
	if _, ok := strings.CutPrefix(got.GetValue(), abortStarted); !ok {
		return 0, fmt.Errorf("abort stream answered %q to %q", got.GetValue(), abortStart)
	}
	if err := waitDescendant(ctx, serverPid, "sleep"); err != nil {
		return 0, err
	}
	took, err := a.exchange(wrapperspb.String(abortKill), got)
	if err != nil {
		return 0, fmt.Errorf("abort sleep: %w", err)
	}
	if got.GetValue() != abortKilled {
		return 0, fmt.Errorf("abort stream answered %q to %q", got.GetValue(), abortKill)
	}
	return took, nil
}

// floodOnce asks a new stream of method (Flood or ExecFlood) for
// streamBytes, receives them and returns the time from opening the stream
// to its end.
func floodOnce(ctx context.Context, conn *grpc.ClientConn, method int) (time.Duration, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	s, err := conn.NewStream(ctx, &echoService.Streams[method], methodName(method))
	if err != nil {
		return 0, 0, fmt.Errorf("open %s stream: %w", methodName(method), err)
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
			return 0, 0, fmt.Errorf("%s: %w", methodName(method), err)
		}
		got += int64(len(m.GetValue()))
	}
	took := time.Since(start)
	if got != streamBytes {
		return 0, 0, fmt.Errorf("%s carried %d bytes, want %d", methodName(method), got, streamBytes)
	}
	if method == methodExecFloodSaved {
		if saved := s.Trailer().Get(savedBytesKey); len(saved) != 1 || saved[0] != strconv.Itoa(streamBytes) {
			return 0, 0, fmt.Errorf("%s saved %q bytes, want %d", methodName(method), saved, streamBytes)
		}
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
// sent anywhere. The tuned transport enlarges the pipe first.
func headOnce(ctx context.Context, t transport) (time.Duration, int64, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", fmt.Sprintf("head -c %d /dev/zero", streamBytes))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := t.setPipeSize(out.(*os.File)); err != nil {
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
