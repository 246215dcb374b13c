package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkReapOrphans measures what the reaper does at each SIGCHLD when
// no orphan is left, with 0 and with 1,000 other threads in the process
// (a toolsvc with 1,000 idle sessions has a spawner thread each): the cost
// must not grow with them.
func BenchmarkReapOrphans(b *testing.B) {
	for _, threads := range []int{0, 1000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range threads {
				wg.Add(1)
				ready := make(chan struct{})
				go func() {
					defer wg.Done()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					close(ready)
					<-stop
				}()
				<-ready
			}
			b.ResetTimer()
			for b.Loop() {
				reapOrphans()
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
		})
	}
}

// TestOwnChildrenListsManyOrphans leaves 1,000 orphans to this process (a
// subreaper, see TestMain), more than one page of the children file holds,
// and checks that ownChildren lists every one, twice in a row (it reads
// the same open file again).
func TestOwnChildrenListsManyOrphans(t *testing.T) {
	const n = 1000
	out, err := exec.Command("/bin/sh", "-c", fmt.Sprintf("for i in $(seq %d); do sleep 4719 </dev/null >/dev/null 2>&1 & echo $!; done", n)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var orphans []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, pid)
	}
	defer func() {
		for _, pid := range orphans {
			_ = unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, 0, nil)
		}
	}()
	if len(orphans) != n {
		t.Fatalf("%d orphans started, want %d", len(orphans), n)
	}
	for range 2 {
		listed := ownChildren()
		for _, pid := range orphans {
			if !slices.Contains(listed, pid) {
				t.Fatalf("orphan %d not among the %d children listed", pid, len(listed))
			}
		}
	}
}
