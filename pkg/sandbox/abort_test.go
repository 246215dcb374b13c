package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/sandbox"
)

// An abort freezes the call at once and kills it a moment later. Frozen,
// its processes run none of their own code; a kill (a timeout) or the
// runner's Close ends them without waiting for the kill to come.
func TestAbortFreezesThenKills(t *testing.T) {
	sandbox.DelayAbortKill(t, time.Hour) // the kill must come from Kill or Close
	for _, backend := range []string{"none", "landlock"} {
		for _, end := range []string{"Kill", "Close"} {
			t.Run(backend+"/"+end, func(t *testing.T) {
				r := newRunner(t, configs[backend])
				// Two busy processes: the command and a child of its own.
				p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"bash", "-c", "while :; do :; done & while :; do :; done"}})
				if err != nil {
					t.Fatal(err)
				}
				dir := sandbox.CallCgroupDir(p)
				if dir == "" {
					t.Skip("no cgroup v2 directory for calls here (they need root or a delegated hierarchy)")
				}
				testkit.WaitFor(t, time.Minute, "both processes to run", func() bool { return len(procsIn(t, dir)) == 2 })
				p.Abort()
				testkit.WaitFor(t, time.Minute, "the call to be frozen", func() bool {
					b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
					return err == nil && bytes.Contains(b, []byte("frozen 1"))
				})
				// Running, each would use about 5 clock ticks in 50 ms.
				before := cpuTicks(t, dir)
				time.Sleep(50 * time.Millisecond)
				if after := cpuTicks(t, dir); after != before {
					t.Errorf("frozen processes used CPU time: %d ticks, then %d", before, after)
				}
				select {
				case <-p.Done():
					t.Fatal("the aborted call ended before anything killed it")
				default:
				}

				ended := make(chan struct{})
				go func() {
					defer close(ended)
					if end == "Kill" {
						p.Kill()
					} else {
						r.Close()
					}
				}()
				select {
				case <-ended:
				case <-time.After(time.Minute):
					// Kill the call past the code under test, so that
					// the test can end.
					_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
					<-ended
					t.Fatalf("%s waited for the kill that follows an abort", end)
				}
				p.Output().Close()
				if code, err := p.Wait(); err != nil || code != 137 {
					t.Fatalf("exit %d, %v; want 137", code, err)
				}
			})
		}
	}
}

// procsIn returns the processes in a cgroup v2 directory.
func procsIn(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// cpuTicks sums the user and system time of the processes in a cgroup v2
// directory, in clock ticks.
func cpuTicks(t *testing.T, dir string) int {
	t.Helper()
	total := 0
	for _, pid := range procsIn(t, dir) {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command's name, which is in parentheses:
		// utime and stime are the 12th and 13th of them.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		for _, s := range f[11:13] {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("/proc/%s/stat: %v", pid, err)
			}
			total += n
		}
	}
	return total
}
