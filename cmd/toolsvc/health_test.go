package main_test

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcauth/rpcauthtest"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// probe is what one run of `toolsvc health` did.
type probe struct {
	code           int // exit status
	stdout, stderr string
}

func runHealth(t *testing.T, args ...string) probe {
	t.Helper()
	cmd := exec.Command(toolsvcBin, append([]string{"health"}, args...)...)
	// The probe must not depend on the test's environment (a token in
	// TOOLWIRE_TOKEN would be sent).
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	p := probe{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		p.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("toolsvc health: %v", err)
	}
	return p
}

// check fails the test unless p exited with code and its one line (stdout
// on success, stderr on failure) contains want.
func (p probe) check(t *testing.T, code int, want string) {
	t.Helper()
	out, quiet := p.stderr, p.stdout
	if code == 0 {
		out, quiet = p.stdout, p.stderr
	}
	if p.code != code || !strings.Contains(out, want) || strings.Count(out, "\n") != 1 || quiet != "" {
		t.Fatalf("toolsvc health exited %d, want %d with one line containing %q\nstdout: %q\nstderr: %q", p.code, code, want, p.stdout, p.stderr)
	}
}

// TestHealthFollowsTheDrain probes a real toolsvc before and during the
// drain SIGTERM starts. A call that waits for a file the test creates keeps
// the drain going for as long as the test needs: readiness must fail all
// along, liveness must pass, and the call must still get its result.
func TestHealthFollowsTheDrain(t *testing.T) {
	root := sandboxtest.Dir(t)
	addr, server := startServe(t, root, "--grace", "5m")
	runHealth(t, "--addr", addr, "--insecure").check(t, 0, "toolwire.executor.v1.ExecutorService at "+addr+" is SERVING")
	runHealth(t, "--addr", addr, "--insecure", "--service", "").check(t, 0, "server at "+addr+" is SERVING")

	call := exec.Command(toolsvcBin, "call", "--addr", addr, "--insecure")
	call.Stdin = strings.NewReader(`{"type":"tool_use","id":"wait","name":"Bash","input":{"command":"touch started; while [ ! -e release ]; do sleep 0.05; done; echo released"}}`)
	var callOut, callErr bytes.Buffer
	call.Stdout, call.Stderr = &callOut, &callErr
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			if err := os.WriteFile(filepath.Join(root, "release"), nil, 0o644); err != nil {
				t.Error(err)
			}
			if err := call.Wait(); err != nil {
				t.Errorf("toolsvc call: %v\n%s", err, callErr.String())
			}
		})
	}
	t.Cleanup(release)
	waitFor(t, "the call to start", func() bool {
		_, err := os.Stat(filepath.Join(root, "started"))
		return err == nil
	})

	// Where cgroups can be made (as root) the sessions' calls are in a
	// directory of the process's own, which must go with it.
	during := cgroupsOf(t, server.Process.Pid)
	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The signal arrives when it arrives: wait for the first failing probe.
	var p probe
	waitFor(t, "readiness to fail after SIGTERM", func() bool {
		p = runHealth(t, "--addr", addr, "--insecure")
		return p.code != 0
	})
	p.check(t, 1, "toolwire.executor.v1.ExecutorService at "+addr+" is NOT_SERVING (draining or stopping)")
	// The call is still running, so the drain goes on: every probe now
	// sees it.
	runHealth(t, "--addr", addr, "--insecure", "--service", "").check(t, 1, "server at "+addr+" is NOT_SERVING")
	runHealth(t, "--addr", addr, "--insecure", "--live").check(t, 0, "is alive (NOT_SERVING)")
	if _, err := os.Stat(filepath.Join(root, "release")); err == nil {
		t.Fatal("the call was released early")
	}

	release()
	if !strings.Contains(callOut.String(), `"content": "released"`) {
		t.Fatalf("the drained call did not finish normally: %s\n%s", callOut.String(), callErr.String())
	}
	done := make(chan error, 1)
	go func() { done <- server.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("toolsvc exited with %v after the drain, want 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("toolsvc did not stop once its last call ended")
	}
	if left := cgroupsOf(t, server.Process.Pid); len(left) > 0 {
		t.Errorf("toolsvc left its cgroup directories behind: %v (while the call ran: %v)", left, during)
	}
	// Nobody answers any more: liveness fails too.
	runHealth(t, "--addr", addr, "--insecure", "--live").check(t, 1, "Unavailable")
}

// TestHealthSecurity probes real servers with TLS, mutual TLS and tokens.
// The health service needs no client credentials, but the transport must
// match the server's and the server's certificate must check out.
func TestHealthSecurity(t *testing.T) {
	p := newTestPKI(t)
	root := sandboxtest.Dir(t)
	named := p.ca.Issue(t, "named", rpcauthtest.Options{DNSNames: []string{"toolsvc.test"}})
	tlsFlags := []string{"--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile}
	trustCA := &rpcauth.ClientConfig{CAFile: p.ca.CertFile}
	servers := map[string]string{
		"tls":     startSecureServe(t, root, "", trustCA, tlsFlags...),
		"mtls":    startSecureServe(t, root, "", trustCA, append(tlsFlags, "--tls-client-ca", p.ca.CertFile, "--token-file", p.token)...),
		"named":   startSecureServe(t, root, "", &rpcauth.ClientConfig{CAFile: p.ca.CertFile, ServerName: "toolsvc.test"}, "--tls-cert", named.CertFile, "--tls-key", named.KeyFile),
		"unix":    startSecureServe(t, root, "unix://"+filepath.Join(t.TempDir(), "toolsvc.sock"), &rpcauth.ClientConfig{}, "--token-file", p.token),
		"expired": startSecureServe(t, root, "", nil, "--tls-cert", p.expiredServer.CertFile, "--tls-key", p.expiredServer.KeyFile),
		"stalled": stalledListener(t),
	}
	ca := []string{"--tls-ca", p.ca.CertFile}
	tests := []struct {
		name   string
		server string
		args   []string
		code   int
		want   string
	}{
		{"TLS", "tls", ca, 0, "is SERVING"},
		{"mutual TLS and token, with both", "mtls", append(ca, "--tls-cert", p.client.CertFile, "--tls-key", p.client.KeyFile, "--token-file", p.token), 0, "is SERVING"},
		{"mutual TLS and token, with neither", "mtls", ca, 0, "is SERVING"},
		{"certificate for a DNS name, with --tls-server-name", "named", append(ca, "--tls-server-name", "toolsvc.test"), 0, "is SERVING"},
		{"unix socket", "unix", nil, 0, "is SERVING"},

		{"certificate for a DNS name, without --tls-server-name", "named", ca, 1, "cannot validate certificate for 127.0.0.1"},
		{"server certificate from another CA", "tls", []string{"--tls-ca", p.other.CertFile}, 1, "Unavailable: connection error"},
		{"expired server certificate", "expired", ca, 1, "certificate has expired"},
		{"plaintext probe, TLS server", "tls", []string{"--insecure"}, 1, "Unavailable"},
		{"no transport given for TCP", "tls", nil, 1, "refusing to connect to"},
		{"unknown service", "tls", append(ca, "--service", "no.such.Service"), 1, ": the server does not know this service"},
		{"no answer", "stalled", append(ca, "--timeout", "300ms"), 1, "no answer within 300ms"},
		{"usage", "tls", []string{"--timeout", "0s"}, 2, "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runHealth(t, append([]string{"--addr", servers[tt.server]}, tt.args...)...)
			got.check(t, tt.code, tt.want)
		})
	}
	// Liveness of a server nobody can reach (wrong trust) fails as well: a
	// probe that cannot complete the handshake has no answer.
	runHealth(t, "--addr", servers["tls"], "--tls-ca", p.other.CertFile, "--live").check(t, 1, "Unavailable")
}

// stalledListener accepts TCP connections and never says anything: a hung
// server, for the probe's timeout.
func stalledListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, time.Minute, what, cond)
}

// cgroupsOf lists the directories toolwire process pid makes in the cgroup
// hierarchies mounted here (toolwire-<pid> and the runners' below it).
func cgroupsOf(t *testing.T, pid int) []string {
	t.Helper()
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	name := "toolwire-" + strconv.Itoa(pid)
	var found []string
	for _, line := range strings.Split(string(info), "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || (fields[sep+1] != "cgroup" && fields[sep+1] != "cgroup2") {
			continue
		}
		_ = filepath.WalkDir(fields[4], func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if b := d.Name(); b == name || strings.HasPrefix(b, name+"-") {
				found = append(found, p)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return found
}
