package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// nobody is the uid and gid toolsvc runs tools as by default when started as
// root; the workspace must belong to it so sandboxed commands can write.
const nobody = 65534

// stopTimeout bounds the wait for a child after SIGTERM before it is killed.
const stopTimeout = 15 * time.Second

// child is a process toolbench started and must stop.
type child struct {
	name string
	cmd  *exec.Cmd
	logs *tailBuffer
	done chan struct{} // closed when the process has been waited for
	err  error         // Wait's error, valid after done
}

// startChild starts bin with args. Its stderr is kept (the last 64 KiB) to
// explain a failure; stdout goes to the returned reader when wantStdout.
func startChild(name, bin string, args, env []string, wantStdout bool) (*child, io.ReadCloser, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), logs: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	c.cmd.Stderr = c.logs
	c.cmd.Env = env
	// An os.Pipe rather than StdoutPipe: Wait runs at once in its own
	// goroutine and must not close the reader under us.
	var stdout *os.File
	if wantStdout {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: stdout pipe: %w", name, err)
		}
		c.cmd.Stdout = w
		defer w.Close()
		stdout = r
	}
	if err := c.cmd.Start(); err != nil {
		if stdout != nil {
			_ = stdout.Close()
		}
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	if stdout == nil {
		return c, nil, nil
	}
	return c, stdout, nil
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// failure describes a child that ended early, with the end of its log.
func (c *child) failure() error {
	return fmt.Errorf("%s exited early (%v); its last output:\n%s", c.name, c.err, c.logs.String())
}

// stop sends SIGTERM to the child's PID and waits for it; a child still
// running after stopTimeout is killed.
func (c *child) stop() error {
	if c.exited() {
		return nil
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s (pid %d): %w", c.name, c.cmd.Process.Pid, err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("%s (pid %d) ignored SIGTERM for %v and was killed", c.name, c.cmd.Process.Pid, stopTimeout)
}

// tailBuffer is an io.Writer that keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex // guards buf
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port that was free a
// moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("release port %s: %w", addr, err)
	}
	return addr, nil
}

// dial connects to a loopback server with the options toolbench uses for
// floors and toolsvc alike. Reconnect backoff is short so that waiting for a
// starting server does not round its start-up time up to a second. extra
// options (a transport's) are appended.
func dial(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16 << 20)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 500 * time.Microsecond, Multiplier: 1.2, MaxDelay: 2 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return conn, nil
}

// workDir is toolbench's temporary directory tree.
type workDir struct {
	base string // removed on cleanup
	tmp  string // TMPDIR of the toolsvc children: session scratch directories
}

// newWorkDir creates the temporary tree. Its base is traversable by every
// user, so the sandbox user can reach workspaces created in it.
func newWorkDir() (*workDir, error) {
	base, err := os.MkdirTemp("", "toolbench-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	w := &workDir{base: base, tmp: filepath.Join(base, "tmp")}
	if err := os.Chmod(base, 0o755); err != nil {
		w.cleanup()
		return nil, fmt.Errorf("make %s traversable: %w", base, err)
	}
	if err := os.Mkdir(w.tmp, 0o755); err != nil {
		w.cleanup()
		return nil, fmt.Errorf("create scratch dir: %w", err)
	}
	return w, nil
}

// workspace creates a workspace directory the sandbox user may write.
func (w *workDir) workspace(name string) (string, error) {
	dir := filepath.Join(w.base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create workspace: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return "", fmt.Errorf("give workspace %s to nobody: %w", dir, err)
		}
	}
	return dir, nil
}

func (w *workDir) cleanup() error {
	// toolsvc as root binds its session temp root onto itself and undoes
	// it as it stops; one killed instead leaves it.
	roots, _ := filepath.Glob(filepath.Join(w.tmp, "toolwire-sessions-*"))
	for _, r := range roots {
		_ = syscall.Unmount(r, syscall.MNT_DETACH)
	}
	if err := os.RemoveAll(w.base); err != nil {
		return fmt.Errorf("remove %s: %w", w.base, err)
	}
	return nil
}

// toolsvcProc is a running `toolsvc serve` and a connection to it.
type toolsvcProc struct {
	*child
	sandbox string
	root    string // workspace root
	addr    string
	conn    *grpc.ClientConn
	client  executorv1.ExecutorServiceClient
}

// startToolsvc starts `toolsvc serve` on a free loopback port with the given
// sandbox backend and workspace root, waits until its health service says
// SERVING, and returns it with the time that took from process start. The
// connection has rpcserver.DefaultTransport's windows and buffers, as
// toolwire's clients do, unless grpcDefaults; extra are more flags of
// toolsvc serve.
func startToolsvc(ctx context.Context, bin, sandbox, root string, w *workDir, grpcDefaults bool, extra ...string) (*toolsvcProc, time.Duration, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, 0, err
	}
	args := []string{"serve", "--listen", addr, "--root", root, "--sandbox", sandbox,
		"--max-concurrency", "32", "--grace", "2s", "--log-format", "text", "--log-level", "warn"}
	if plaintextFlag(bin) {
		args = append(args, "--insecure") // loopback only; TLS is not what is measured
	}
	if os.Geteuid() != 0 {
		// toolsvc's default, --network none, needs a network namespace of
		// its own, which only root may make; the report says so.
		args = append(args, "--network", "host")
	}
	args = append(args, extra...)
	env := append(os.Environ(), "TMPDIR="+w.tmp)
	start := time.Now()
	c, _, err := startChild("toolsvc (sandbox="+sandbox+")", bin, args, env, false)
	if err != nil {
		return nil, 0, err
	}
	p := &toolsvcProc{child: c, sandbox: sandbox, root: root, addr: addr}
	var opts []grpc.DialOption
	if !grpcDefaults {
		opts = rpcserver.DefaultTransport.DialOptions()
	}
	if p.conn, err = dial(addr, opts...); err != nil {
		_ = c.stop()
		return nil, 0, err
	}
	if err := waitServing(ctx, p.conn, c); err != nil {
		_ = p.stop()
		return nil, 0, err
	}
	took := time.Since(start)
	p.client = executorv1.NewExecutorServiceClient(p.conn)
	return p, took, nil
}

// plaintextFlag reports whether `toolsvc serve` has --insecure, which newer
// builds require to serve plaintext on a TCP address. The answer is asked of
// the binary once and remembered.
func plaintextFlag(bin string) bool {
	plaintextOnce.Do(func() {
		out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
		plaintext = strings.Contains(string(out), "-insecure")
	})
	return plaintext
}

var (
	plaintextOnce sync.Once
	plaintext     bool
)

// stop closes the connection and stops the process.
func (p *toolsvcProc) stop() error {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	return p.child.stop()
}

// waitServing polls the executor's health status until it is SERVING, the
// child exits, or 30 seconds pass.
func waitServing(ctx context.Context, conn *grpc.ClientConn, c *child) error {
	health := healthpb.NewHealthClient(conn)
	req := &healthpb.HealthCheckRequest{Service: executorv1.ExecutorService_ServiceDesc.ServiceName}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c.exited() {
			return c.failure()
		}
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		resp, err := health.Check(cctx, req, grpc.WaitForReady(true))
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not SERVING after 30s (last: %v %v); its output:\n%s", c.name, resp.GetStatus(), err, c.logs.String())
		}
		if err == nil { // connected but not yet serving
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// startEcho starts this binary again as the bare gRPC server of the floors
// and returns it with its two addresses: untuned and tuned. Its TMPDIR is
// tmp, where the saved-output reference writes, as toolsvc's children do.
func startEcho(ctx context.Context, tmp string) (*child, [2]string, error) {
	var none [2]string
	self, err := os.Executable()
	if err != nil {
		return nil, none, fmt.Errorf("find own executable: %w", err)
	}
	c, stdout, err := startChild("echo server", self, []string{echoCommand}, append(os.Environ(), "TMPDIR="+tmp), true)
	if err != nil {
		return nil, none, err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout) // until the child exits
		_ = stdout.Close()
	}()
	select {
	case s := <-line:
		addrs, ok := strings.CutPrefix(strings.TrimSpace(s), "listening ")
		plain, tunedAddr, two := strings.Cut(addrs, " ")
		if !ok || !two {
			_ = c.stop()
			return nil, none, fmt.Errorf("echo server said %q, want \"listening ADDR TUNED-ADDR\"; stderr:\n%s", s, c.logs.String())
		}
		return c, [2]string{plain, tunedAddr}, nil
	case <-ctx.Done():
		_ = c.stop()
		return nil, none, ctx.Err()
	case <-time.After(30 * time.Second):
		_ = c.stop()
		return nil, none, fmt.Errorf("echo server did not report its addresses in 30s")
	}
}
