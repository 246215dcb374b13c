package container_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolwire/toolwire/internal/testkit"
)

// baseImage is what scripts/base-image builds.
const baseImage = "toolwire/base:bookworm"

// toolUID is the uid of the "tool" user of deploy/docker/toolsvc.Dockerfile,
// the owner of /workspace.
const toolUID = "10001"

// sessionUIDs is the range toolsvc gives sessions their users from by
// default (sandbox.DefaultSessionUIDs).
var sessionUIDs = [2]int{200000, 265535}

// securityFlags are the docker run flags docs/security.md recommends for
// toolsvc, word for word; the main container runs with exactly these.
var securityFlags = [][2]string{
	{"--cap-drop", "ALL"},
	{"--cap-add", "SYS_ADMIN"},    // the tools' network namespace; mounting a writable cgroup2
	{"--cap-add", "NET_ADMIN"},    // bringing up loopback in that namespace
	{"--cap-add", "SETUID"},       // tools run as their session's user
	{"--cap-add", "SETGID"},       // ... and group
	{"--cap-add", "CHOWN"},        // the session's workspace, temp dir and output pipes go to that user
	{"--cap-add", "DAC_OVERRIDE"}, // toolsvc (root) uses workspaces owned by other users
	{"--cap-add", "KILL"},         // killing a session user's processes
	{"--cgroupns", "private"},     // lets the entry point mount the container's own cgroup2
	{"--security-opt", "no-new-privileges"},
	{"--read-only", ""},
}

// limitFlags bound what tool processes can consume. docs/security.md names
// the same options (with larger values); these are small to keep the bombs
// quick.
var limitFlags = [][2]string{
	{"--tmpfs", "/tmp:rw,exec,nosuid,nodev,size=256m"},
	{"--tmpfs", "/workspace:rw,exec,nosuid,nodev,size=128m,uid=" + toolUID + ",gid=" + toolUID + ",mode=0751"},
	{"--memory", "512m"},
	{"--memory-swap", "512m"},
	{"--pids-limit", "1024"},
	{"--ulimit", "nproc=256:256"},
	{"--ulimit", "fsize=67108864:67108864"},
}

// fileSizeLimit is the fsize ulimit of limitFlags in bytes.
const fileSizeLimit = 67108864

// flagArgs flattens flag pairs into docker arguments.
func flagArgs(pairs [][2]string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, p[0])
		if p[1] != "" {
			out = append(out, p[1])
		}
	}
	return out
}

// secretsDir is where the containers find their TLS key pair and token,
// bind-mounted read-only from the host as docs/security.md shows.
const secretsDir = "/run/secrets/toolsvc"

// serverName is the name in toolsvc's test certificate.
const serverName = "toolsvc"

// serveArgs are the toolsvc flags every test container gets: TLS and a
// bearer token, read from secretsDir.
var serveArgs = []string{
	"--tls-cert", secretsDir + "/tls.crt",
	"--tls-key", secretsDir + "/tls.key",
	"--token-file", secretsDir + "/token",
}

// fixture is what TestMain builds once for every test.
type fixture struct {
	root      string // repository root
	work      string // temporary build context, removed at the end
	bin       string // static toolsvc: the image's binary and the host client
	runID     string // unique to this run: in every name, tag and label
	image     string // the toolsvc image under test
	network   string // the --internal network
	gateway   string // the host's address on that network
	container string // the main toolsvc container
	addr      string // its ip:7070
	secret    string // TOOLWIRE_SECRET in toolsvc's environment
	creds     *testCreds
}

var (
	fx      *fixture
	skipWhy string
)

// env returns the fixture, or skips the test when docker is not usable.
func env(t *testing.T) *fixture {
	t.Helper()
	if fx == nil {
		t.Skip(skipWhy)
	}
	return fx
}

func TestMain(m *testing.M) {
	flag.Parse()
	if err := dockerUsable(); err != nil {
		skipWhy = fmt.Sprintf("docker is not usable, so toolsvc cannot be tested in a container: %v", err)
		os.Exit(m.Run())
	}
	f, err := setup()
	fx = f
	if err != nil {
		fmt.Fprintf(os.Stderr, "container test setup: %v\n", err)
		if f != nil {
			if err := f.teardown(); err != nil {
				fmt.Fprintf(os.Stderr, "container test teardown: %v\n", err)
			}
		}
		os.Exit(1)
	}
	code := m.Run()
	if err := f.teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "container test teardown: %v\n", err)
		code = 1
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func dockerUsable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := docker(ctx, "version", "--format", "{{.Server.Version}}")
	return err
}

// setup builds the binary and both images, creates the network and starts
// the main container. It prints how long each step took.
func setup() (*fixture, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("repository root not found from the test directory: %w", err)
	}
	id := make([]byte, 4)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	runID := fmt.Sprintf("twct-%d-%s", os.Getpid(), hex.EncodeToString(id))
	f := &fixture{
		root:      root,
		runID:     runID,
		image:     "toolwire-test/toolsvc:" + runID,
		network:   runID,
		container: runID + "-toolsvc",
		secret:    "secret-" + hex.EncodeToString(id) + "-do-not-leak",
	}
	if f.work, err = os.MkdirTemp("", "toolwire-container-test-"); err != nil {
		return nil, err
	}
	f.bin = filepath.Join(f.work, "toolsvc")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	step := func(what string, fn func() error) error {
		start := time.Now()
		err := fn()
		fmt.Fprintf(os.Stderr, "container test: %-28s %v\n", what, time.Since(start).Round(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	err = step("TLS certificates", func() error {
		f.creds, err = newTestCreds(filepath.Join(f.work, "secrets"), filepath.Join(f.work, "client"), serverName)
		return err
	})
	if err != nil {
		return f, err
	}
	err = step("go build (CGO_ENABLED=0)", func() error {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", f.bin, "./cmd/toolsvc")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		entry, err := os.ReadFile(filepath.Join(root, "deploy", "docker", "toolsvc-entrypoint"))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(f.work, "toolsvc-entrypoint"), entry, 0o755)
	})
	if err == nil {
		err = step("scripts/base-image", func() error {
			cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "base-image"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%v\n%s", err, testkit.Tail(out.String(), 4000))
			}
			return nil
		})
	}
	if err == nil {
		err = step("docker build", func() error {
			_, err := docker(ctx, "build", "--quiet", "--force-rm",
				"--build-arg", "BASE="+baseImage,
				"--label", "toolwire.test="+runID,
				"-f", filepath.Join(root, "deploy", "docker", "toolsvc.Dockerfile"),
				"-t", f.image, f.work)
			return err
		})
	}
	if err == nil {
		err = step("docker network create", func() error {
			if _, err := docker(ctx, "network", "create", "--internal", "--label", "toolwire.test="+runID, f.network); err != nil {
				return err
			}
			gw, err := docker(ctx, "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", f.network)
			if err != nil {
				return err
			}
			if gw == "" {
				return errors.New("the network has no gateway address")
			}
			f.gateway = gw
			return nil
		})
	}
	if err == nil {
		err = step("start toolsvc", func() error {
			args := append(flagArgs(securityFlags), flagArgs(limitFlags)...)
			args = append(args, "-e", "TOOLWIRE_SECRET="+f.secret)
			addr, err := f.start(ctx, f.container, args)
			f.addr = addr
			return err
		})
	}
	return f, err
}

// runArgs returns the docker run arguments of a test container: on the
// test network, labelled for teardown, with the secrets mounted, then
// dockerArgs, the image, serveArgs and toolsvcArgs.
func (f *fixture) runArgs(name string, dockerArgs []string, toolsvcArgs []string) []string {
	args := []string{"run", "--detach", "--name", name, "--network", f.network, "--label", "toolwire.test=" + f.runID,
		"--mount", "type=bind,src=" + f.creds.serverDir + ",dst=" + secretsDir + ",readonly"}
	args = append(append(args, dockerArgs...), f.image)
	return append(append(args, serveArgs...), toolsvcArgs...)
}

// start runs the test image as a detached container on the test network
// and waits until toolsvc serves; it returns the address to dial.
func (f *fixture) start(ctx context.Context, name string, dockerArgs []string, toolsvcArgs ...string) (string, error) {
	if _, err := docker(ctx, f.runArgs(name, dockerArgs, toolsvcArgs)...); err != nil {
		return "", err
	}
	ip, err := docker(ctx, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
	if err != nil {
		return "", err
	}
	addr := ip + ":7070"
	if err := f.waitServing(ctx, name, addr); err != nil {
		logs, _ := dockerAll(ctx, "logs", name)
		return "", fmt.Errorf("%w\ncontainer logs:\n%s", err, testkit.Tail(logs, 4000))
	}
	return addr, nil
}

// waitServing polls toolsvc's health service until it reports SERVING, the
// container stops, or a minute passes.
func (f *fixture) waitServing(ctx context.Context, name, addr string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.creds.caPEM)
	tc := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{Service: "toolwire.executor.v1.ExecutorService"})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if running, _ := docker(ctx, "inspect", "-f", "{{.State.Running}}", name); running != "true" {
			return fmt.Errorf("container %s stopped before toolsvc served", name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("toolsvc at %s not serving after a minute: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// teardown removes everything the run created and checks that nothing is
// left: no container, network or image with the run's label or name.
func (f *fixture) teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	label := "label=toolwire.test=" + f.runID
	if ids, err := docker(ctx, "ps", "-aq", "--filter", label); err != nil {
		errs = append(errs, err)
	} else if ids != "" {
		if _, err := docker(ctx, append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if f.gateway != "" || f.network != "" {
		if out, err := docker(ctx, "network", "ls", "-q", "--filter", label); err == nil && out != "" {
			if _, err := docker(ctx, "network", "rm", f.network); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if out, err := docker(ctx, "image", "ls", "-q", f.image); err == nil && out != "" {
		if _, err := docker(ctx, "image", "rm", "-f", f.image); err != nil {
			errs = append(errs, err)
		}
	}
	if f.work != "" {
		if err := os.RemoveAll(f.work); err != nil {
			errs = append(errs, err)
		}
	}
	// What docker ps -a, docker network ls and docker image ls still show.
	for _, check := range [][]string{
		{"ps", "-aq", "--filter", label},
		{"network", "ls", "-q", "--filter", label},
		{"image", "ls", "-q", "--filter", label},
		{"image", "ls", "-q", f.image},
	} {
		out, err := docker(ctx, check...)
		if err != nil {
			errs = append(errs, err)
		} else if out != "" {
			errs = append(errs, fmt.Errorf("left behind: docker %s shows %s", strings.Join(check, " "), out))
		}
	}
	return errors.Join(errs...)
}

// docker runs the docker CLI and returns its trimmed standard output; the
// error carries standard error.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// dockerAll runs the docker CLI and returns standard output and standard
// error together (docker logs replays the container's stderr on stderr).
func dockerAll(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return string(out), err
}

// toolResult is one tool_result block printed by toolsvc call.
type toolResult struct {
	ToolUseID string          `json:"tool_use_id"`
	Raw       json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Content   string          `json:"-"`
}

// callOpts say where a call runs.
type callOpts struct {
	addr      string // toolsvc address; empty means the main container
	workspace string // session workspace relative to /workspace
}

// callResult is one toolsvc call: the result and the protections the
// session's Hello reported.
type callResult struct {
	toolResult
	enforced []string
}

// run sends one tool use in a new session and returns its result. The test
// fails when toolsvc call fails.
func (f *fixture) run(t *testing.T, o callOpts, name string, input any) callResult {
	t.Helper()
	r, err := f.tryRun(t, o, name, input)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryRun is run that returns toolsvc call's failure instead.
func (f *fixture) tryRun(t *testing.T, o callOpts, name string, input any) (callResult, error) {
	t.Helper()
	in, err := json.Marshal([]map[string]any{{"type": "tool_use", "id": "toolu_test", "name": name, "input": input}})
	if err != nil {
		t.Fatal(err)
	}
	addr := o.addr
	if addr == "" {
		addr = f.addr
	}
	args := []string{"call", "--addr", addr, "--progress",
		"--tls-ca", f.creds.caFile, "--tls-server-name", serverName, "--token-file", f.creds.tokenFile}
	if o.workspace != "" {
		args = append(args, "--workspace", o.workspace)
	}
	// Every call of the suite ends well within this; a call that does not
	// is a hang, which is a failure of its own.
	const callLimit = 150 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, args...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no result after %v: toolsvc hangs", callLimit)
		}
		return callResult{}, fmt.Errorf("toolsvc call %s %s: %v\n%s", name, in, err, testkit.Tail(stderr.String(), 2000))
	}
	var rs []toolResult
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil || len(rs) != 1 {
		return callResult{}, fmt.Errorf("toolsvc call printed %q (%v), want one tool_result", stdout.String(), err)
	}
	r := callResult{toolResult: rs[0]}
	if err := json.Unmarshal(r.Raw, &r.Content); err != nil {
		r.Content = string(r.Raw)
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		var ev struct {
			Hello *struct {
				Sandbox struct {
					Enforced []string `json:"enforced"`
				} `json:"sandbox"`
			} `json:"hello"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Hello != nil {
			r.enforced = ev.Hello.Sandbox.Enforced
		}
	}
	return r, nil
}

// bash runs a Bash command in a new session of the main container.
func (f *fixture) bash(t *testing.T, command string, timeoutMS int) callResult {
	t.Helper()
	in := map[string]any{"command": command}
	if timeoutMS > 0 {
		in["timeout"] = timeoutMS
	}
	return f.run(t, callOpts{}, "Bash", in)
}

// wantError fails unless r is an is_error result whose content holds every
// one of wants.
func wantError(t *testing.T, r callResult, wants ...string) {
	t.Helper()
	if !r.IsError {
		t.Errorf("is_error is false, want true; content:\n%s", testkit.Tail(r.Content, 2000))
	}
	for _, w := range wants {
		if !strings.Contains(r.Content, w) {
			t.Errorf("content lacks %q:\n%s", w, testkit.Tail(r.Content, 2000))
		}
	}
}

// wantOK fails unless r succeeded.
func wantOK(t *testing.T, r callResult) {
	t.Helper()
	if r.IsError {
		t.Fatalf("call failed:\n%s", testkit.Tail(r.Content, 2000))
	}
}

// inContainer runs a command in the main container as root, outside the
// sandbox: the test's view of what really happened.
func (f *fixture) inContainer(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return docker(ctx, append([]string{"exec", f.container}, args...)...)
}

// processes lists every process of the main container as "STAT USER ARGS"
// lines, as root sees them from outside the sandbox (a tool sees only its
// own session's).
func (f *fixture) processes(t *testing.T) []string {
	t.Helper()
	out, err := f.inContainer(t, "ps", "-eo", "stat=,user=,args=")
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, line := range strings.Split(out, "\n") {
		ps = append(ps, strings.TrimSpace(line))
	}
	return ps
}

// wantSessionUID fails unless uid (as a tool printed it) lies in the range
// toolsvc gives sessions their users from.
func wantSessionUID(t *testing.T, uid string) {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(uid))
	if err != nil || n < sessionUIDs[0] || n > sessionUIDs[1] {
		t.Errorf("tools run as uid %q, want one of the session range %d-%d", uid, sessionUIDs[0], sessionUIDs[1])
	}
}

// state is what docker knows of the main container's life.
func (f *fixture) state(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := docker(ctx, "inspect", "-f", "running={{.State.Running}} pid={{.State.Pid}} started={{.State.StartedAt}} restarts={{.RestartCount}}", f.container)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
