package execgrpc_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/settings"
)

// The benchmarks below come in pairs: a floor that does the least the same
// work could cost (a bare gRPC exchange, a bare os/exec spawn) and the same
// work through a real toolsvc stream over loopback TCP. docs/benchmarks.md
// reports their ratios.

// benchEnv is a real executor served on loopback TCP.
type benchEnv struct {
	root   string
	client executorv1.ExecutorServiceClient
	close  func()
}

// newBenchEnv serves an executor with the given sandbox backend and dials
// it as toolwire's clients do (rpcserver.DefaultTransport). With gRPC's
// default dial options the client would send a window update and a BDP
// ping after nearly every Result, which none of ours does.
func newBenchEnv(b *testing.B, backend string) *benchEnv {
	b.Helper()
	return serveBench(b, sandboxtest.Dir(b), backend, rpcserver.DefaultTransport.DialOptions()...)
}

// serveBench serves a real executor on root on loopback TCP, with every
// call allowed, and dials it with dial on top of plaintext credentials.
func serveBench(b *testing.B, root, backend string, dial ...grpc.DialOption) *benchEnv {
	b.Helper()
	ex, err := execsvc.New(execsvc.Config{Root: root, MaxConcurrency: 32, Sandbox: sandbox.Config{Backend: backend},
		Operator: settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}}})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := rpcserver.New(nil)
	executorv1.RegisterExecutorServiceServer(srv.Server, execgrpc.NewServer(ex, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{root: root, client: executorv1.NewExecutorServiceClient(conn), close: func() {
		ex.Close()
		_ = conn.Close()
		srv.Stop()
		<-done
	}}
}

// session opens an Execute stream and returns functions to run one call and
// wait for its result, and to abort a call.
type benchSession struct {
	b       *testing.B
	s       executorv1.ExecutorService_ExecuteClient
	cancel  context.CancelFunc
	n       int
	results chan *executorv1.Result
	started chan string
}

func (e *benchEnv) session(b *testing.B) *benchSession {
	return e.sessionWith(b, &executorv1.Open{
		Options: &executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION}})
}

// sessionWith is session with the given Open.
func (e *benchEnv) sessionWith(b *testing.B, open *executorv1.Open) *benchSession {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.client.Execute(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: open}}); err != nil {
		b.Fatal(err)
	}
	bs := &benchSession{b: b, s: s, cancel: cancel, results: make(chan *executorv1.Result, 1024), started: make(chan string, 1024)}
	go func() {
		for {
			ev, err := s.Recv()
			if err != nil {
				close(bs.results)
				return
			}
			if r := ev.GetResult(); r != nil {
				bs.results <- r
			}
			if st := ev.GetStarted(); st != nil {
				select { // only BenchmarkAbortSleep reads these
				case bs.started <- st.GetToolUseId():
				default:
				}
			}
		}
	}()
	return bs
}

func (bs *benchSession) send(name, input string) string {
	bs.n++
	id := fmt.Sprintf("toolu_%d", bs.n)
	if err := bs.s.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: id, Name: name, InputJson: input, AssistantMessageId: fmt.Sprintf("msg_%d", bs.n)}}}); err != nil {
		bs.b.Fatal(err)
	}
	return id
}

func (bs *benchSession) result() *executorv1.Result {
	r, ok := <-bs.results
	if !ok {
		bs.b.Fatal("stream ended")
	}
	return r
}

// echoDesc is a bare bidirectional echo service: the floor for one
// request/response exchange on a gRPC stream.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "bench.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Ping", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			for {
				m := new(wrapperspb.BytesValue)
				if err := stream.RecvMsg(m); err != nil {
					return nil
				}
				if err := stream.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}, {
		StreamName: "Flood", ServerStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			m := new(wrapperspb.Int64Value)
			if err := stream.RecvMsg(m); err != nil {
				return err
			}
			chunk := &wrapperspb.BytesValue{Value: make([]byte, 64<<10)}
			for sent := int64(0); sent < m.Value; sent += int64(len(chunk.Value)) {
				if err := stream.SendMsg(chunk); err != nil {
					return err
				}
			}
			return nil
		},
	}},
}

func echoClient(b *testing.B) (*grpc.ClientConn, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&echoDesc, nil)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	return conn, func() { _ = conn.Close(); srv.Stop() }
}

// BenchmarkFloorGRPCPingPong is one 1 KiB message each way on a bare gRPC
// bidi stream: the floor for BenchmarkRead1KiB.
func BenchmarkFloorGRPCPingPong(b *testing.B) {
	conn, stop := echoClient(b)
	defer stop()
	s, err := conn.NewStream(context.Background(), &echoDesc.Streams[0], "/bench.Echo/Ping")
	if err != nil {
		b.Fatal(err)
	}
	msg := &wrapperspb.BytesValue{Value: make([]byte, 1024)}
	b.ResetTimer()
	for b.Loop() {
		if err := s.SendMsg(msg); err != nil {
			b.Fatal(err)
		}
		if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead1KiB reads a 1 KiB file through the full stream.
func BenchmarkRead1KiB(b *testing.B) {
	benchRead1KiB(b, &executorv1.Open{
		Options: &executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION}})
}

// BenchmarkRead1KiBFolded is BenchmarkRead1KiB in a session opened as the
// orchestrator opens its sessions: each Read's Result comes alone.
func BenchmarkRead1KiBFolded(b *testing.B) {
	benchRead1KiB(b, &executorv1.Open{Options: &executorv1.SessionOptions{
		ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION, Lifecycle: executorv1.Lifecycle_LIFECYCLE_FOLDED}})
}

func benchRead1KiB(b *testing.B, open *executorv1.Open) {
	e := newBenchEnv(b, "none")
	defer e.close()
	read := readCalls(b, e, open)
	b.ResetTimer()
	for b.Loop() {
		read()
	}
}

// readCalls opens a session on e and returns a function that makes one
// Read of a 1 KiB file and waits for its Result.
func readCalls(b *testing.B, e *benchEnv, open *executorv1.Open) func() {
	path := filepath.Join(e.root, "one-kib.txt")
	line := "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqr\n" // 64 bytes
	data := make([]byte, 0, 1024)
	for len(data) < 1024 {
		data = append(data, line...)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	bs := e.sessionWith(b, open)
	b.Cleanup(bs.cancel)
	// Alternate two ranges so no read is the "unchanged" stub.
	inputs := []string{fmt.Sprintf(`{"file_path":%q}`, path), fmt.Sprintf(`{"file_path":%q,"offset":1,"limit":100}`, path)}
	i := 0
	return func() {
		bs.send("Read", inputs[i%2])
		i++
		if r := bs.result(); r.GetIsError() {
			b.Fatalf("read failed: %v", r)
		}
	}
}

// BenchmarkReadRetained reports the heap a session keeps per finished
// Read: its Result and events for a Resume and a repeated tool_use id
// (up to 1,000 calls), and nothing else. A busy executor's heap grows by
// this much per call until the windows fill, and every page of that growth
// is a page fault.
func BenchmarkReadRetained(b *testing.B) {
	e := newBenchEnv(b, "none")
	defer e.close()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const warm, calls = 50, 900
	var total float64
	for b.Loop() {
		b.StopTimer()
		// A new session each time, so that its windows never fill.
		read := readCalls(b, e, &executorv1.Open{
			Options: &executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION}})
		for range warm {
			read()
		}
		before := heap()
		b.StartTimer()
		for range calls {
			read()
		}
		b.StopTimer()
		total += float64(heap()) - float64(before)
		b.StartTimer()
	}
	b.ReportMetric(total/float64(b.N*calls), "retained-B/call")
}

// BenchmarkFloorExecBashTrue spawns bash -c true with os/exec: the floor for
// BenchmarkBashTrue.
func BenchmarkFloorExecBashTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashTrue runs Bash `true` through the full stream, with the
// sandbox off and on.
func BenchmarkBashTrue(b *testing.B) {
	for _, backend := range []string{"none", "landlock"} {
		b.Run("sandbox="+backend, func(b *testing.B) {
			e := newBenchEnv(b, backend)
			defer e.close()
			bs := e.session(b)
			defer bs.cancel()
			b.ResetTimer()
			for b.Loop() {
				bs.send("Bash", `{"command":"true"}`)
				if r := bs.result(); r.GetIsError() {
					b.Fatalf("bash failed: %v", r)
				}
			}
		})
	}
}

// BenchmarkFloorExec32 spawns 32 bash -c true at once with os/exec.
func BenchmarkFloorExec32(b *testing.B) {
	for b.Loop() {
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() { _ = exec.Command("/bin/bash", "-c", "true").Run() })
		}
		wg.Wait()
	}
}

// BenchmarkBashTrue32 sends 32 Bash `true` calls of one message (safe, so
// they run in parallel up to the concurrency limit, raised to 32 here).
func BenchmarkBashTrue32(b *testing.B) {
	for _, backend := range []string{"none", "landlock"} {
		b.Run("sandbox="+backend, func(b *testing.B) {
			e := newBenchEnv(b, backend)
			defer e.close()
			bs := e.session(b)
			defer bs.cancel()
			b.ResetTimer()
			for b.Loop() {
				for range 32 {
					bs.send("Bash", `{"command":"true"}`)
				}
				for range 32 {
					if r := bs.result(); r.GetIsError() {
						b.Fatalf("bash failed: %v", r)
					}
				}
			}
		})
	}
}

// BenchmarkFloorGRPCStream64MiB streams 64 MiB in 64 KiB messages on a bare
// gRPC server stream: the floor for BenchmarkBashStream64MiB.
func BenchmarkFloorGRPCStream64MiB(b *testing.B) {
	conn, stop := echoClient(b)
	defer stop()
	b.SetBytes(64 << 20)
	for b.Loop() {
		s, err := conn.NewStream(context.Background(), &echoDesc.Streams[1], "/bench.Echo/Flood")
		if err != nil {
			b.Fatal(err)
		}
		if err := s.SendMsg(wrapperspb.Int64(64 << 20)); err != nil {
			b.Fatal(err)
		}
		_ = s.CloseSend()
		for {
			if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != nil {
				break
			}
		}
	}
}

// BenchmarkBashStream64MiB streams 64 MiB of command output to the client
// as Progress events.
func BenchmarkBashStream64MiB(b *testing.B) {
	e := newBenchEnv(b, "none")
	defer e.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.SetBytes(64 << 20)
	var delivered uint64
	start := time.Now()
	for b.Loop() {
		s, err := e.client.Execute(ctx)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{}}})
		_ = s.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
			Id: "flood", Name: "Bash", InputJson: `{"command":"head -c 67108864 /dev/zero"}`, AssistantMessageId: "m"}}})
		_ = s.CloseSend()
		var got uint64
		for {
			ev, err := s.Recv()
			if err != nil {
				break
			}
			p := ev.GetProgress()
			got += uint64(len(p.GetOutput())) + p.GetDroppedBytes()
			delivered += uint64(len(p.GetOutput()))
		}
		if got != 64<<20 {
			b.Fatalf("progress carried %d bytes, want %d", got, 64<<20)
		}
	}
	// MB/s counts the command's output; delivered-MB/s only the bytes that
	// reached the client, the figure issue 3 compares with the floor.
	b.ReportMetric(float64(delivered)/1e6/time.Since(start).Seconds(), "delivered-MB/s")
}

// BenchmarkAbortSleep measures the time from sending an Abort for a running
// `sleep 30` to receiving its Result, and reports the median.
func BenchmarkAbortSleep(b *testing.B) {
	e := newBenchEnv(b, "none")
	defer e.close()
	bs := e.session(b)
	defer bs.cancel()
	var samples []time.Duration
	b.ResetTimer()
	for b.Loop() {
		id := bs.send("Bash", `{"command":"sleep 30"}`)
		for got := <-bs.started; got != id; got = <-bs.started {
		}
		time.Sleep(2 * time.Millisecond) // let bash exec sleep
		start := time.Now()
		if err := bs.s.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
			Target: &executorv1.Abort_ToolUseId{ToolUseId: id}}}}); err != nil {
			b.Fatal(err)
		}
		r := bs.result()
		samples = append(samples, time.Since(start))
		if r.GetOutcome() != executorv1.Outcome_OUTCOME_INTERRUPTED {
			b.Fatalf("abort result %v", r)
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "median-µs")
}
