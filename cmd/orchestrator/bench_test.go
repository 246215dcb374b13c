package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// BenchmarkLoopOverhead measures the orchestrator's own share of a tool
// round trip: the time from the moment the fake API finished streaming a
// response with tool_use blocks (message_stop sent) to the moment the next
// request, carrying the results, arrived. It includes handing the calls to
// a toolsvc process over TCP, running them there, and sending the results
// back to the model; the model's own time is not in it.
//
// OneMCPEcho is an MCP no-op beside OneRead: the example server's echo
// tool (examples/mcp/server), started by toolsvc in the session's sandbox
// when the session opens, so its start is not measured.
//
// Reported per iteration: gap-ms (mean) and gap-p50-ms; tail-ms and
// tail-p50-ms are the part after the executor finished the last call (the
// results' way back to the orchestrator, the transcript write and the next
// request), which is the loop's overhead proper.
func BenchmarkLoopOverhead(b *testing.B) {
	cases := []struct {
		name  string
		mcp   bool                                     // the session has the example MCP server as "ex"
		setup func(root string, i int) []fakeapi.Block // tool_uses of the measured response
		prep  func(root string, i int) []fakeapi.Block // tool_uses of an unmeasured response before it
	}{
		{name: "OneRead", setup: func(root string, i int) []fakeapi.Block {
			return []fakeapi.Block{fakeapi.ToolUse(fmt.Sprintf("toolu_r%d", i), "Read", map[string]any{"file_path": filepath.Join(root, "f0.txt")})}
		}},
		{name: "OneMCPEcho", mcp: true, setup: func(root string, i int) []fakeapi.Block {
			return []fakeapi.Block{fakeapi.ToolUse(fmt.Sprintf("toolu_m%d", i), "mcp__ex__echo", map[string]any{"text": "x"})}
		}},
		{name: "TenParallelReads", setup: func(root string, i int) []fakeapi.Block {
			return reads(root, i)
		}},
		{name: "TenEdits", prep: reads, setup: func(root string, i int) []fakeapi.Block {
			var bs []fakeapi.Block
			for f := range 10 {
				bs = append(bs, fakeapi.ToolUse(fmt.Sprintf("toolu_e%d_%d", i, f), "Edit", map[string]any{
					"file_path": filepath.Join(root, fmt.Sprintf("f%d.txt", f)), "old_string": fmt.Sprintf("v%d", i), "new_string": fmt.Sprintf("v%d", i+1),
				}))
			}
			return bs
		}},
		{name: "OneBashTrue", setup: func(root string, i int) []fakeapi.Block {
			return []fakeapi.Block{fakeapi.ToolUse(fmt.Sprintf("toolu_b%d", i), "Bash", map[string]any{"command": "true"})}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			root := sandboxtest.Dir(b)
			var servers mcpclient.Servers
			if c.mcp {
				var bin string
				root, bin = mcpWorkspace(b)
				servers = mcpclient.Servers{"ex": {Command: bin}}
			}
			for f := range 10 {
				if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", f)), []byte("line one\nvalue v0\n"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			addr := startToolsvc(b, root)
			fake, err := fakeapi.Start()
			if err != nil {
				b.Fatal(err)
			}
			defer fake.Close()
			orch, closeOrch := benchOrchestrator(b, fake.URL, addr)
			defer closeOrch()

			var gaps, tails []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				sess, err := orch.Create(context.Background(), "", orchestrator.SessionConfig{Settings: &settings.Settings{
					Permissions: settings.Permissions{DefaultMode: permission.ModeBypass},
				}, MCPServers: servers})
				if err != nil {
					b.Fatal(err)
				}
				before := len(fake.Requests())
				if c.prep != nil {
					fake.Push(fakeapi.ToolTurn(c.prep(root, i)...))
				}
				fake.Push(fakeapi.ToolTurn(c.setup(root, i)...), fakeapi.EndTurn(fakeapi.Text("ok")))
				res, err := sess.Run(context.Background(), "go")
				if err != nil || res.StopReason != orchestrator.StopEndTurn {
					b.Fatalf("turn: %+v %v", res, err)
				}
				reqs := fake.Requests()
				measured := reqs[len(reqs)-2]
				if c.prep != nil && len(reqs)-before != 3 || c.prep == nil && len(reqs)-before != 2 {
					b.Fatalf("%d requests in the turn", len(reqs)-before)
				}
				for _, blk := range reqs[len(reqs)-1].Body.Messages[len(reqs[len(reqs)-1].Body.Messages)-1].Content {
					if blk.IsError != nil && *blk.IsError {
						b.Fatalf("a measured call failed: %+v", blk)
					}
				}
				next := reqs[len(reqs)-1].Received
				gaps = append(gaps, next.Sub(measured.Finished))
				tails = append(tails, next.Sub(lastResult(sess)))
				if err := orch.Delete(context.Background(), sess.ID()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, gaps, "gap")
			report(b, tails, "tail")
		})
	}
}

// lastResult returns when the executor finished the session's last call.
func lastResult(sess *orchestrator.Session) time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // read only the events already held
	sub := sess.Subscribe(0)
	var last time.Time
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return last
		}
		if ev.Kind == orchestrator.EventToolResult {
			if t := ev.Result.FinishedAt; t.After(last) {
				last = t
			}
		}
	}
}

func report(b *testing.B, ds []time.Duration, name string) {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	slices.Sort(ds)
	b.ReportMetric(float64(sum.Microseconds())/float64(len(ds))/1000, name+"-ms")
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-p50-ms")
}

func reads(root string, i int) []fakeapi.Block {
	var bs []fakeapi.Block
	for f := range 10 {
		bs = append(bs, fakeapi.ToolUse(fmt.Sprintf("toolu_r%d_%d", i, f), "Read", map[string]any{"file_path": filepath.Join(root, fmt.Sprintf("f%d.txt", f))}))
	}
	return bs
}

// benchOrchestrator returns an orchestrator using the fake API and the
// executor at addr, the way `orchestrator --executor addr` dials it.
func benchOrchestrator(b *testing.B, apiURL, addr string) (*orchestrator.Orchestrator, func()) {
	mc, err := model.New(model.Config{APIKey: "test", BaseURL: apiURL, Model: "claude-bench", MaxRetries: -1})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	executors, err := execgrpc.NewClient(execgrpc.ClientConfig{
		Conn: func(context.Context, string) (grpc.ClientConnInterface, error) { return conn, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	st, err := transcript.Open(b.TempDir(), transcript.Options{})
	if err != nil {
		b.Fatal(err)
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model:           mc,
		Executor:        executors,
		DefaultExecutor: addr,
		Store:           orchestrator.FileStore(st),
	})
	if err != nil {
		b.Fatal(err)
	}
	return orch, func() {
		orch.Close()
		st.Close()
		conn.Close()
	}
}

// turnsPerConversation is the length of BenchmarkTurnOverhead's
// conversation.
const turnsPerConversation = 200

// BenchmarkTurnOverhead runs a conversation of 200 user turns, each a
// prompt, one Read through a toolsvc process, and a closing text reply,
// against the fake API, and reports the orchestrator's own time per turn
// as the conversation grows. The own time of a turn is what is left of it
// once the model (the fake's streaming) and the executor (from the call's
// hand-over to its Result) are taken out: from Run to the first request's
// arrival, from the executor's Result to the second request's arrival, and
// from the end of the closing reply to Run's return. It includes building
// and sending each request, whose body holds the whole history, as the API
// requires.
//
// The fake API runs in a process of its own, as the API does: decoding a
// request of turn 200 (two hundred turns of history, twice) costs the fake
// several times what the turn costs the orchestrator, and in the
// benchmark's process the garbage collection of what it decoded fell on
// the orchestrator's time, more the longer the conversation.
//
// Reported: own-ms-tN, the median own time of turns N-4..N (turns 1..5 for
// t1), with the median over iterations when b.N > 1; and t200/t1, their
// ratio. Run with -benchtime 1x -count N and compare with benchstat.
func BenchmarkTurnOverhead(b *testing.B) {
	root := sandboxtest.Dir(b)
	file := filepath.Join(root, "f.txt")
	if err := os.WriteFile(file, []byte("line one\nline two\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := startToolsvc(b, root)
	fake := startFakeAPIProcess(b, file)
	orch, closeOrch := benchOrchestrator(b, fake.URL, addr)
	defer closeOrch()

	marks := []int{1, 50, 100, 200}
	perMark := make(map[int][]time.Duration)
	for b.Loop() {
		sess, err := orch.Create(context.Background(), "", orchestrator.SessionConfig{Settings: &settings.Settings{
			Permissions: settings.Permissions{DefaultMode: permission.ModeBypass},
		}})
		if err != nil {
			b.Fatal(err)
		}
		own := make([]time.Duration, turnsPerConversation+1)
		for turn := 1; turn <= turnsPerConversation; turn++ {
			start := time.Now()
			res, err := sess.Run(context.Background(), fmt.Sprintf("turn %d: read the file", turn))
			end := time.Now()
			if err != nil || res.StopReason != orchestrator.StopEndTurn {
				b.Fatalf("turn %d: %+v %v", turn, res, err)
			}
			reqs, err := fake.finished(2)
			if err != nil {
				b.Fatal(err)
			}
			if len(reqs) != 2 {
				b.Fatalf("turn %d made %d requests, want 2", turn, len(reqs))
			}
			first, second := reqs[0], reqs[1]
			if first.messages != 4*turn-3 || second.messages != 4*turn-1 {
				b.Fatalf("turn %d sent %d and %d messages, want %d and %d", turn, first.messages, second.messages, 4*turn-3, 4*turn-1)
			}
			if second.isError {
				b.Fatalf("turn %d: the Read failed", turn)
			}
			own[turn] = first.received.Sub(start) + second.received.Sub(lastResult(sess)) + end.Sub(second.finished)
		}
		for _, m := range marks {
			perMark[m] = append(perMark[m], median(own[max(m-4, 1):max(m+1, 6)]))
		}
		if err := orch.Delete(context.Background(), sess.ID()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, m := range marks {
		b.ReportMetric(float64(median(perMark[m]).Microseconds())/1000, fmt.Sprintf("own-ms-t%d", m))
	}
	b.ReportMetric(float64(median(perMark[200]))/float64(median(perMark[1])), "t200/t1")
}

// median is the median of ds (sorted in place).
func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
