package container_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// outside is the denial the file tools give for a path outside the
// session's directories.
const outside = "outside the directories this session may use"

func TestFileToolsStayInWorkspace(t *testing.T) {
	f := env(t)
	passwdBefore, err := f.inContainer(t, "sha256sum", "/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, f.bash(t, "ln -sfn /etc ft-etc && ln -sfn /etc/passwd ft-passwd && echo data > ft-one && ln -f ft-one ft-two", 0))

	tests := []struct {
		name, tool string
		input      map[string]any
		want       []string
	}{
		{"write /etc/passwd", "Write", map[string]any{"file_path": "/etc/passwd", "content": "x\n"},
			[]string{"Access to /etc/passwd was denied", outside}},
		{"write through /tmp/..", "Write", map[string]any{"file_path": "/tmp/../root/x", "content": "x\n"},
			[]string{"Access to /root/x was denied", outside}},
		{"edit /etc/passwd", "Edit", map[string]any{"file_path": "/etc/passwd", "old_string": "root", "new_string": "toor"},
			[]string{"Access to /etc/passwd was denied", outside}},
		{"read /etc/shadow", "Read", map[string]any{"file_path": "/etc/shadow"},
			[]string{"Access to /etc/shadow was denied", outside}},
		{"read toolsvc's environment", "Read", map[string]any{"file_path": "/proc/1/environ"},
			[]string{"Access to /proc/1/environ was denied", outside}},
		{"read toolsvc's token", "Read", map[string]any{"file_path": secretsDir + "/token"},
			[]string{"Access to " + secretsDir + "/token was denied", outside}},
		{"read with .. from the workspace", "Read", map[string]any{"file_path": "/workspace/../etc/passwd"},
			[]string{"Access to /etc/passwd was denied", outside}},
		{"read relative ..", "Read", map[string]any{"file_path": "../etc/passwd"},
			[]string{"Access to /etc/passwd was denied", outside}},
		{"read through a symlink to /etc", "Read", map[string]any{"file_path": "/workspace/ft-etc/passwd"},
			[]string{"leads through a symbolic link to /etc/passwd", outside}},
		{"read a symlink to /etc/passwd", "Read", map[string]any{"file_path": "/workspace/ft-passwd"},
			[]string{"leads through a symbolic link to /etc/passwd", outside}},
		{"write through a symlink to /etc", "Write", map[string]any{"file_path": "/workspace/ft-etc/evil", "content": "x\n"},
			[]string{"leads through a symbolic link to /etc/evil", outside}},
		{"read /proc/self/root", "Read", map[string]any{"file_path": "/proc/self/root/etc/passwd"},
			[]string{"Access to /proc/self/root/etc/passwd was denied", outside}},
		{"read /proc/1/root", "Read", map[string]any{"file_path": "/proc/1/root/etc/shadow"},
			[]string{"Access to /proc/1/root/etc/shadow was denied", outside}},
		{"read a file with two hard links", "Read", map[string]any{"file_path": "/workspace/ft-two"},
			[]string{"Access to /workspace/ft-two was denied", "2 hard links"}},
		{"grep /etc", "Grep", map[string]any{"pattern": "root", "path": "/etc"},
			[]string{"Access to /etc was denied", outside}},
		{"grep through a symlink", "Grep", map[string]any{"pattern": "root", "path": "/workspace/ft-etc"},
			[]string{"leads through a symbolic link to /etc", outside}},
		{"glob /etc", "Glob", map[string]any{"pattern": "*", "path": "/etc"},
			[]string{"Access to /etc was denied", outside}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, f.run(t, callOpts{}, tt.tool, tt.input), tt.want...)
		})
	}
	t.Run("glob with ..", func(t *testing.T) {
		r := f.run(t, callOpts{}, "Glob", map[string]any{"pattern": "../etc/*"})
		if r.IsError || r.Content != "No files found" {
			t.Errorf("Glob ../etc/*: is_error %v, content %q; want \"No files found\"", r.IsError, r.Content)
		}
	})

	if after, _ := f.inContainer(t, "sha256sum", "/etc/passwd"); after != passwdBefore {
		t.Errorf("/etc/passwd changed: %s, was %s", after, passwdBefore)
	}
	for _, p := range []string{"/root/x", "/etc/evil"} {
		if _, err := f.inContainer(t, "test", "!", "-e", p); err != nil {
			t.Errorf("%s exists after the attempts to write it", p)
		}
	}
}

func TestBashConfined(t *testing.T) {
	f := env(t)
	passwdBefore, err := f.inContainer(t, "sha256sum", "/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	// Several layers stand in the way; each case names the first that
	// stops it in the recommended configuration. The cases on world-writable
	// or world-readable paths are stopped by Landlock alone.
	tests := []struct {
		name, command string
		want          []string
	}{
		// Read-only root file system (then file mode, then Landlock).
		{"write /etc/passwd", "echo x > /etc/passwd", []string{"Exit code 1", "/etc/passwd: Read-only file system"}},
		// /root is root's, mode 0700.
		{"write through /tmp/..", "echo x > /tmp/../root/x", []string{"Exit code 1", "/tmp/../root/x: Permission denied"}},
		// Landlock: /tmp and /dev/shm are writable by everyone.
		{"write /tmp outside the session's temp dir", "echo x > /tmp/x", []string{"Exit code 1", "/tmp/x: Permission denied"}},
		{"write /dev/shm", "echo x > /dev/shm/x", []string{"Exit code 1", "/dev/shm/x: Permission denied"}},
		// Landlock: /etc/issue is readable by everyone but not allowed.
		{"read a world-readable file outside the allowed paths", "cat /etc/issue", []string{"Exit code 1", "cat: /etc/issue: Permission denied"}},
		{"read /etc/shadow", "cat /etc/shadow", []string{"Exit code 1", "cat: /etc/shadow: Permission denied"}},
		// Another user's process: invisible in the session's /proc (and
		// outside the Landlock domain).
		{"read toolsvc's environment", "cat /proc/1/environ", []string{"Exit code 1", "cat: /proc/1/environ: No such file or directory"}},
		{"read the parent's environment", "cat /proc/$PPID/environ", []string{"Exit code 1", "/environ: No such file or directory"}},
		{"see toolsvc", "ls -d /proc/1", []string{"Exit code 2", "/proc/1': No such file or directory"}},
		{"signal toolsvc", "kill -KILL 1", []string{"Exit code 1", "kill: (1) - Operation not permitted"}},
		// toolsvc's TLS key and token: a directory of root's, mode 0700.
		{"read toolsvc's TLS key", "cat " + secretsDir + "/tls.key", []string{"Exit code 1", secretsDir + "/tls.key: Permission denied"}},
		{"read toolsvc's token", "cat " + secretsDir + "/token", []string{"Exit code 1", secretsDir + "/token: Permission denied"}},
		// The workspace is a file system of its own.
		{"hard link /etc/passwd", "ln /etc/passwd hl", []string{"Exit code 1", "failed to create hard link", "Invalid cross-device link"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, f.bash(t, tt.command, 0), tt.want...)
		})
	}
	t.Run("unprivileged with no_new_privs", func(t *testing.T) {
		r := f.bash(t, "id -u; grep -E '^(NoNewPrivs|CapPrm|CapEff|CapAmb):' /proc/self/status", 0)
		wantOK(t, r)
		uid, rest, _ := strings.Cut(r.Content, "\n")
		wantSessionUID(t, uid)
		want := "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1"
		if rest != want {
			t.Errorf("identity:\n%s\nwant:\n%s", rest, want)
		}
	})
	if after, _ := f.inContainer(t, "sha256sum", "/etc/passwd"); after != passwdBefore {
		t.Errorf("/etc/passwd changed: %s, was %s", after, passwdBefore)
	}
	for _, p := range []string{"/root/x", "/tmp/x", "/dev/shm/x", "/workspace/hl"} {
		if _, err := f.inContainer(t, "test", "!", "-e", p); err != nil {
			t.Errorf("%s exists after the attempt to write it", p)
		}
	}
}

func TestEnvironmentSecretsStayWithToolsvc(t *testing.T) {
	f := env(t)
	// The secret really is in toolsvc's environment: the test reads it as
	// root from outside the sandbox.
	environ, err := f.inContainer(t, "cat", "/proc/1/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(environ, "TOOLWIRE_SECRET="+f.secret) {
		t.Fatalf("toolsvc's environment lacks the secret the test gave it: %q", environ)
	}
	r := f.bash(t, "env", 0)
	wantOK(t, r)
	if strings.Contains(r.Content, f.secret) || strings.Contains(r.Content, "TOOLWIRE_SECRET") {
		t.Errorf("a tool sees toolsvc's secret:\n%s", r.Content)
	}
	if !strings.Contains(r.Content, "USER=toolwire") || !strings.Contains(r.Content, "PATH=") {
		t.Errorf("env is missing the variables a tool should get:\n%s", r.Content)
	}
}

func TestNetworkEgressBlocked(t *testing.T) {
	f := env(t)
	l, err := net.Listen("tcp", net.JoinHostPort(f.gateway, "0"))
	if err != nil {
		t.Fatalf("listen on the network's gateway: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	lines := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(lines)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			s, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			lines <- strings.TrimSpace(s)
		}
	}()
	defer wg.Wait()
	defer l.Close()

	connect := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && echo %%s >&3", f.gateway, port)
	// Control: the container's own network namespace reaches the listener,
	// so a failure of the tool below is the sandbox's doing.
	control := func() {
		t.Helper()
		if out, err := f.inContainer(t, "bash", "-c", fmt.Sprintf(connect, "control")); err != nil {
			t.Fatalf("control connection from the container's network namespace: %v %s", err, out)
		}
		if got := <-lines; got != "control" {
			t.Fatalf("listener got %q, want the control connection", got)
		}
	}
	control()
	r := f.bash(t, fmt.Sprintf(connect, "tool"), 0)
	wantError(t, r, "Exit code 1", "Network is unreachable")
	// Connections are accepted in order: had the tool connected, its line
	// would come before the second control's.
	control()
}

func TestForkBombContained(t *testing.T) {
	f := env(t)
	before := f.state(t)
	r := f.bash(t, "b(){ b | b & }; b; sleep 600", 5000)
	wantError(t, r, "Command timed out after 5s", "fork: retry: Resource temporarily unavailable")
	if after := f.state(t); after != before {
		t.Errorf("container changed: %s, was %s", after, before)
	}
	for _, p := range f.processes(t) {
		if strings.Contains(p, "b(){") || strings.HasPrefix(p, "Z") {
			t.Errorf("left over after the fork bomb: %s", p)
		}
	}
}

func TestMemoryBombContained(t *testing.T) {
	f := env(t)
	before := f.state(t)
	// tail keeps every byte of a line that never ends. The kernel's OOM
	// killer ends it (bash may have exec'd it, so no "Killed" line).
	r := f.bash(t, "tail /dev/zero", 60000)
	wantError(t, r, "Exit code 137")
	if after := f.state(t); after != before {
		t.Errorf("container changed: %s, was %s", after, before)
	}
	wantOK(t, f.bash(t, "true", 0))
}

func TestDiskFillerContained(t *testing.T) {
	f := env(t)
	t.Cleanup(func() { f.bash(t, "rm -f df-*", 0) })
	r := f.bash(t, "head -c 100M /dev/zero > df-big", 0)
	wantError(t, r, "Exit code 153", "File size limit exceeded")
	r = f.bash(t, "stat -c %s df-big", 0)
	wantOK(t, r)
	if r.Content != fmt.Sprint(fileSizeLimit) {
		t.Errorf("df-big holds %s bytes, want the file size limit %d", r.Content, fileSizeLimit)
	}
	// Many files below the size limit fill the workspace, which is bounded.
	r = f.bash(t, "for i in 1 2 3 4; do head -c 60M /dev/zero > df-$i || exit; done", 0)
	wantError(t, r, "No space left on device")
}

func TestEndlessOutputContained(t *testing.T) {
	f := env(t)
	before := f.state(t)
	r := f.bash(t, "yes", 3000)
	wantError(t, r, "Command timed out after 3s", "characters truncated")
	// 30000 is toolsvc's --max-output-chars default; the status line and
	// the truncation marker come on top.
	if n := len([]rune(r.Content)); n > 30000+200 {
		t.Errorf("result holds %d characters, want at most about 30000", n)
	}
	if after := f.state(t); after != before {
		t.Errorf("container changed: %s, was %s", after, before)
	}
	for _, p := range f.processes(t) {
		if strings.HasSuffix(p, " yes") {
			t.Errorf("left over: %s", p)
		}
	}
}

func TestNoSurvivorsAfterTimeout(t *testing.T) {
	f := env(t)
	r := f.bash(t, "(setsid sleep 4242 &); (sleep 4343 &); bash -c '(setsid bash -c \"sleep 4444 & wait\" &)'; sleep 600", 2000)
	wantError(t, r, "Command timed out after 2s")
	for _, p := range f.processes(t) {
		for _, marker := range []string{"sleep 4242", "sleep 4343", "sleep 4444", "sleep 600"} {
			if strings.Contains(p, marker) {
				t.Errorf("survived the timeout: %s", p)
			}
		}
		if strings.HasPrefix(p, "Z") {
			t.Errorf("zombie: %s", p)
		}
	}
}

// ptraceAttach is a perl command that tries PTRACE_ATTACH (amd64) on the
// pid after it and prints the error.
const ptraceAttach = `perl -e 'syscall(101, 16, $ARGV[0] + 0, 0, 0) == -1 or die "attached\n"; print "$!\n"'`

func TestSessionsIsolated(t *testing.T) {
	f := env(t)
	// toolsvc makes both workspaces, each its session user's alone. Every
	// toolsvc call is a session of its own: later sessions in iso-a get
	// a's files shown as theirs.
	a, b := callOpts{workspace: "iso-a"}, callOpts{workspace: "iso-b"}
	wantOK(t, f.run(t, a, "Write", map[string]any{"file_path": "/workspace/iso-a/secret.txt", "content": "a's secret\n"}))
	wantOK(t, f.run(t, b, "Bash", map[string]any{"command": "true"}))
	for _, d := range []string{"/workspace/iso-a", "/workspace/iso-b"} {
		out, err := f.inContainer(t, "stat", "-c", "%u %a", d)
		if err != nil {
			t.Fatal(err)
		}
		uid, mode, _ := strings.Cut(out, " ")
		wantSessionUID(t, uid)
		if mode != "700" {
			t.Errorf("%s has mode %s, want 700", d, mode)
		}
	}

	wantError(t, f.run(t, b, "Read", map[string]any{"file_path": "/workspace/iso-a/secret.txt"}),
		"Access to /workspace/iso-a/secret.txt was denied", outside)
	wantError(t, f.run(t, b, "Bash", map[string]any{"command": "cat /workspace/iso-a/secret.txt"}),
		"Permission denied")
	wantError(t, f.run(t, b, "Bash", map[string]any{"command": "echo x > /workspace/iso-a/planted"}),
		"Permission denied")

	// A process of session a, still running while session b attacks it.
	type outcome struct {
		r   callResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := f.tryRun(t, a, "Bash", map[string]any{"command": "sleep 5151; echo sleep ended with $?", "timeout": 60000})
		done <- outcome{r, err}
	}()
	var pid string
	for pid == "" {
		select {
		case o := <-done:
			t.Fatalf("session a's call ended before its sleep was seen: %q %v", o.r.Content, o.err)
		default:
		}
		out, _ := f.inContainer(t, "pgrep", "-x", "-f", "sleep 5151")
		if pid = strings.TrimSpace(out); pid == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	attacks := []struct {
		name, command string
		want          []string
	}{
		{"list /proc", "ls /proc | grep -x " + pid + " || echo absent", []string{"absent"}},
		{"read its command line", "cat /proc/" + pid + "/cmdline", []string{"Exit code 1", "/proc/" + pid + "/cmdline: No such file or directory"}},
		{"ps", "ps -eo args= | grep -c '^sleep 5151'", []string{"Exit code 1", "0"}},
		{"signal it", "kill -KILL " + pid, []string{"Exit code 1", "kill: (" + pid + ") - Operation not permitted"}},
		{"trace it", ptraceAttach + " " + pid, []string{"Operation not permitted"}},
	}
	for _, at := range attacks {
		t.Run(at.name, func(t *testing.T) {
			r := f.run(t, b, "Bash", map[string]any{"command": at.command})
			for _, w := range at.want {
				if !strings.Contains(r.Content, w) {
					t.Errorf("session b got %q, want %q", r.Content, w)
				}
			}
			if strings.Contains(r.Content, "sleep 5151") || strings.Contains(r.Content, "attached") {
				t.Errorf("session b reached a's process: %q", r.Content)
			}
		})
	}
	if _, err := f.inContainer(t, "kill", "-0", pid); err != nil {
		t.Errorf("session a's process %s is gone after session b's attacks: %v", pid, err)
	}
	// The test (root, outside the sandbox) ends it with SIGTERM: exit 143,
	// where b's SIGKILL would have given 137.
	if _, err := f.inContainer(t, "kill", "-TERM", pid); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if !strings.Contains(o.r.Content, "sleep ended with 143") {
		t.Errorf("session a's call: %q, want its sleep ended by the test's SIGTERM", o.r.Content)
	}
	if _, err := f.inContainer(t, "test", "!", "-e", "/workspace/iso-a/planted"); err != nil {
		t.Error("session b planted a file in session a's workspace")
	}
}

// connectUnix is a perl command that connects to the unix socket after it
// and prints the first line it receives, or the error.
const connectUnix = `perl -MIO::Socket::UNIX -e 'my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die "connect: $!\n"; print scalar <$s>'`

// TestUnixSockets: Landlock does not control connect(2) on socket files, so
// a root-only socket outside the workspace is kept from tools by its mode
// (and the tool's own user) alone. The control makes the socket
// world-writable, the residual risk docs/security.md names: then a tool
// reaches it.
func TestUnixSockets(t *testing.T) {
	f := env(t)
	const dir = "/tmp/rootsock"
	const sock = dir + "/root.sock"
	listen := `mkdir -p -m 0755 ` + dir + ` && echo $$ > ` + dir + `/pid && exec perl -MIO::Socket::UNIX -e 'my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 5) or die "listen: $!\n"; chmod 0660, $ARGV[0]; while (my $c = $l->accept) { print $c "hello from root\n"; close $c }' ` + sock
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := docker(ctx, "exec", "-d", f.container, "bash", "-c", listen); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if pid, err := f.inContainer(t, "cat", dir+"/pid"); err == nil {
			_, _ = f.inContainer(t, "kill", pid)
		}
		_, _ = f.inContainer(t, "rm", "-rf", dir)
	}()
	for {
		if _, err := f.inContainer(t, "test", "-S", sock); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the root socket never appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Control from outside the sandbox: root reaches it.
	if out, err := f.inContainer(t, "bash", "-c", connectUnix+" "+sock); err != nil || out != "hello from root" {
		t.Fatalf("root's own connection: %q %v", out, err)
	}
	wantError(t, f.bash(t, connectUnix+" "+sock, 0), "Exit code 13", "connect: Permission denied")
	if _, err := f.inContainer(t, "chmod", "0666", sock); err != nil {
		t.Fatal(err)
	}
	r := f.bash(t, connectUnix+" "+sock, 0)
	wantOK(t, r)
	if r.Content != "hello from root" {
		t.Errorf("a world-writable socket: %q, want it reached (the residual risk docs/security.md names)", r.Content)
	}
}
