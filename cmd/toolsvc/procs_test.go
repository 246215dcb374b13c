package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// psLogged matches the debug line toolsvc logs when it changes the number
// of Ps its Go code runs on.
var psLogged = regexp.MustCompile(`msg="scheduler Ps" procs=(\d+)`)

// demandLogged matches the line toolsvc logs when a command's output made
// it take all its Ps.
var demandLogged = regexp.MustCompile(`msg="scheduler Ps" procs=(\d+) demanded=true`)

// lastProcs returns the number of Ps the log last reported, 0 if none.
func lastProcs(log string) int {
	m := psLogged.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return 0
	}
	var n int
	fmt.Sscan(m[len(m)-1][1], &n)
	return n
}

// TestServeAdaptsSchedulerProcs runs toolsvc serve as it starts by default:
// its Go code runs on one P at rest, on all of them while many sessions
// read at once, and on one again after they stop.
func TestServeAdaptsSchedulerProcs(t *testing.T) {
	root := sandboxtest.Dir(t)
	if err := os.WriteFile(filepath.Join(root, "small.txt"), []byte(strings.Repeat("a line of text\n", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	// An empty GOMAXPROCS is no setting: the controller is what is tested.
	t.Setenv("GOMAXPROCS", "")
	addr, _, logs := startServeLogged(t, root, "--log-level", "debug")
	if runtime.NumCPU() < 2 {
		waitLog(t, logs, "scheduler Ps left as they are", "one CPU only")
		return
	}
	waitFor(t, "one P at rest", func() bool { return lastProcs(logs.String()) == 1 })

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := openSession(t, conn)
			defer s.close()
			for n := 0; !stop.Load(); n++ {
				s.read(t, fmt.Sprintf("s%d_%d", i, n))
			}
		}()
	}
	waitFor(t, "all Ps while 16 sessions read", func() bool { return lastProcs(logs.String()) > 1 })
	stop.Store(true)
	wg.Wait()
	waitFor(t, "one P after the load", func() bool { return lastProcs(logs.String()) == 1 })
}

// TestServeAdaptiveProcsOff: with --adaptive-procs=false the controller
// does not run at all.
func TestServeAdaptiveProcsOff(t *testing.T) {
	root := sandboxtest.Dir(t)
	addr, _, logs := startServeLogged(t, root, "--log-level", "debug", "--adaptive-procs=false")
	runCall(t, `[{"type":"tool_use","id":"g","name":"Glob","input":{"pattern":"*"}}]`, "--insecure", "--addr", addr)
	if strings.Contains(logs.String(), "scheduler Ps") {
		t.Fatalf("the controller ran with --adaptive-procs=false:\n%s", logs.String())
	}
}

// TestServeKeepsGOMAXPROCSFromTheEnvironment: a GOMAXPROCS the operator
// set is left alone, and the log says why.
func TestServeKeepsGOMAXPROCSFromTheEnvironment(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2")
	_, _, logs := startServeLogged(t, sandboxtest.Dir(t), "--log-level", "debug")
	waitLog(t, logs, "scheduler Ps left as they are", "GOMAXPROCS is set in the environment")
	if lastProcs(logs.String()) != 0 {
		t.Fatalf("the controller ran with GOMAXPROCS set:\n%s", logs.String())
	}
}

func waitLog(t *testing.T, logs *testkit.Buffer, parts ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a log line with %q", parts), func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// TestServeGivesPsToAStream: a Bash command whose output fills every read
// of its pipe has toolsvc take all its Ps at once (a Demand), not after a
// window of its controller, which can be longer than the whole stream.
func TestServeGivesPsToAStream(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	addr, _, logs := startServeLogged(t, sandboxtest.Dir(t), "--log-level", "debug")
	if runtime.NumCPU() < 2 {
		waitLog(t, logs, "scheduler Ps left as they are", "one CPU only")
		return
	}
	// The controller may hold all Ps for reasons of its own when a stream
	// starts (its CPU rule, after toolsvc's own start-up on a slow
	// machine); a demand then changes nothing and logs nothing. Such a
	// stream is run again once the controller is back at one P: what the
	// controller logs first after a stream's start must be the demand. A
	// shell that never demands fails every attempt.
	const attempts = 5
	for attempt := 1; ; attempt++ {
		// from is where the log stood when it last said one P: whatever
		// the controller does after that is in the log past from.
		var from int
		waitFor(t, "one P at rest", func() bool {
			log := logs.String()
			from = len(log)
			return lastProcs(log) == 1
		})
		res := runCall(t, `[{"type":"tool_use","id":"s","name":"Bash","input":{"command":"head -c 16777216 /dev/zero | tr '\\0' x"}}]`, "--insecure", "--addr", addr)
		if len(res) != 1 || (res[0].IsError != nil && *res[0].IsError) {
			t.Fatalf("the streaming command failed: %+v", res)
		}
		// The controller was at one P, so the stream's demand (or a change
		// by the controller's rules before it) is logged by the time the
		// call returns.
		var line string // the controller's first line past from
		testkit.WaitFor(t, 5*time.Second, "a change of Ps in the log after a 16 MiB stream (a demand)", func() bool {
			tail := logs.String()[from:]
			loc := psLogged.FindStringIndex(tail)
			if loc != nil {
				line, _, _ = strings.Cut(tail[loc[0]:], "\n")
			}
			return loc != nil
		})
		if m := demandLogged.FindStringSubmatch(line); m != nil {
			if m[1] == "1" {
				t.Fatalf("a demand that did not give all Ps: %s", line)
			}
			return
		}
		if attempt == attempts {
			t.Fatalf("%d streams, and none had toolsvc demand all Ps before its controller changed them otherwise", attempts)
		}
		t.Logf("attempt %d: the controller changed the Ps first (%s); streaming again", attempt, line)
	}
}
