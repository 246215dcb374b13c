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

// lastProcs returns the number of Ps toolsvc's log last reported, 0 if none.
func lastProcs(logs *testkit.Buffer) int {
	m := psLogged.FindAllStringSubmatch(logs.String(), -1)
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
	waitFor(t, "one P at rest", func() bool { return lastProcs(logs) == 1 })

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
	waitFor(t, "all Ps while 16 sessions read", func() bool { return lastProcs(logs) > 1 })
	stop.Store(true)
	wg.Wait()
	waitFor(t, "one P after the load", func() bool { return lastProcs(logs) == 1 })
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
	if lastProcs(logs) != 0 {
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
	waitFor(t, "one P at rest", func() bool { return lastProcs(logs) == 1 })
	res := runCall(t, `[{"type":"tool_use","id":"s","name":"Bash","input":{"command":"head -c 16777216 /dev/zero | tr '\\0' x"}}]`, "--insecure", "--addr", addr)
	if len(res) != 1 || (res[0].IsError != nil && *res[0].IsError) {
		t.Fatalf("the streaming command failed: %+v", res)
	}
	waitFor(t, "a demand in the log", func() bool { return demandLogged.MatchString(logs.String()) })
	if m := demandLogged.FindStringSubmatch(logs.String()); m[1] == "1" {
		t.Fatalf("a demand that did not give all Ps:\n%s", logs.String())
	}
}
