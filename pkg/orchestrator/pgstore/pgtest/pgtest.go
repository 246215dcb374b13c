// Package pgtest gives tests a real PostgreSQL: the one TOOLWIRE_PG_DSN
// names, or a throwaway cluster started from Debian's binaries
// (/usr/lib/postgresql/<version>/bin) on a unix socket in a temporary
// directory, as user nobody when the tests run as root. Each test gets a
// database of its own.
//
// Without PostgreSQL a test is skipped, unless TOOLWIRE_REQUIRE_POSTGRES=1
// (scripts/test sets it), which makes it fail.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// nobody is the user a cluster runs as when the tests run as root
// (PostgreSQL refuses to run as root).
const nobody = 65534

var (
	mu      sync.Mutex
	cluster *server // started once per test binary
	created atomic.Int64
)

type server struct {
	dir  string // data directory's parent, socket directory and log
	base string // connection string of the maintenance database
	// stopCmd stops the cluster at once (SIGQUIT: immediate shutdown).
	stopCmd func() error
}

// Main runs the tests of m and then stops the cluster they started, if
// any. Call it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		cluster.stop()
	}
	return code
}

// Binaries returns the directory of Debian's PostgreSQL binaries (the
// newest version), or "" when none is installed.
func Binaries() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// DSN returns the connection string of a new, empty database for t,
// dropped when t ends: a postgres:// URL when TOOLWIRE_PG_DSN is one, as
// it is for the throwaway cluster.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TOOLWIRE_PG_DSN")
	if base == "" {
		base = start(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		unavailable(t, fmt.Sprintf("connect to PostgreSQL: %v", err))
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("toolwire_test_%d_%d", os.Getpid(), created.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(base, name)
}

// withDatabase returns the connection string dsn for database name.
func withDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		scheme, rest, _ := strings.Cut(dsn, "://")
		hostPart, query, _ := strings.Cut(rest, "?")
		host, _, _ := strings.Cut(hostPart, "/")
		out := scheme + "://" + host + "/" + name
		if query != "" {
			out += "?" + query
		}
		return out
	}
	var kept []string
	for _, f := range strings.Fields(dsn) {
		if !strings.HasPrefix(f, "dbname=") {
			kept = append(kept, f)
		}
	}
	return strings.Join(append(kept, "dbname="+name), " ")
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("TOOLWIRE_REQUIRE_POSTGRES") == "1" {
		t.Fatalf("PostgreSQL is required (TOOLWIRE_REQUIRE_POSTGRES=1): %s", why)
	}
	t.Skipf("no PostgreSQL: %s (install Debian's postgresql package or set TOOLWIRE_PG_DSN)", why)
}

// start returns the maintenance connection string of the test binary's
// cluster, starting it on first use.
func start(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		return cluster.base
	}
	bin := Binaries()
	if bin == "" {
		unavailable(t, "no /usr/lib/postgresql/*/bin/initdb")
	}
	s, err := startCluster(bin)
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	cluster = s
	return s.base
}

func startCluster(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "toolwire-pg-")
	if err != nil {
		return nil, err
	}
	asNobody := os.Geteuid() == 0
	if asNobody {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return nil, err
		}
	}
	run := func(name string, args ...string) error {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
		if asNobody {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "toolwire", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// postgres itself, not pg_ctl, so that it is a child of the test binary
	// and gets SIGQUIT (immediate shutdown) when the binary dies, also when
	// go test kills it at its timeout.
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-c", "listen_addresses=",
		"-F", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT}
	if asNobody {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	// The parent-death signal follows the thread that started the process,
	// not the process: that thread must live as long as the cluster, so a
	// goroutine locked to it starts postgres and waits to stop it.
	started, stop, stopped := make(chan error), make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		<-stop
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		_ = cmd.Wait()
		close(stopped)
	}()
	if err := <-started; err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{dir: dir,
		base: fmt.Sprintf("postgres://toolwire@/postgres?host=%s&sslmode=disable", dir)}
	s.stopCmd = func() error {
		close(stop)
		<-stopped
		return logf.Close()
	}
	// Ready once it accepts a connection.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, s.base)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return s, nil
		}
		if time.Now().After(deadline) {
			_ = s.stopCmd()
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres did not accept connections within a minute: %w\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.stopCmd != nil {
		if err := s.stopCmd(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop PostgreSQL:", err)
		}
	}
	os.RemoveAll(s.dir)
}
