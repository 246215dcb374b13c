package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// While the spawner thread forks a call's process it sits in the call's
// cgroup v1 directory, whose listing then shows the service's own pid: a
// kill of the call in that moment must not kill the service. (Without the
// guard in killListed this test's process is killed.)
func TestKillListedSparesTheService(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroup directories need root")
	}
	own := findCgroups().v1Pids
	if own == "" {
		t.Skip("no cgroup v1 pids hierarchy")
	}
	dir, err := os.MkdirTemp(own, "toolwire-test-")
	if err != nil {
		t.Skipf("cgroup v1 pids hierarchy not writable: %v", err)
	}
	defer removeDir(dir)
	in, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	home, err := os.OpenFile(filepath.Join(own, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer home.Close()
	listed := make(chan string, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if _, err := unix.Write(int(in.Fd()), currentThread); err != nil {
			listed <- "move in: " + err.Error()
			return
		}
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		killListed(dir)
		if _, err := unix.Write(int(home.Fd()), currentThread); err != nil {
			listed <- "move back: " + err.Error()
			return
		}
		listed <- strings.TrimSpace(string(b))
	}()
	got := <-listed
	if got != strconv.Itoa(os.Getpid()) {
		t.Fatalf("the directory listed %q while the thread was in it, want this process (%d)", got, os.Getpid())
	}
}
