package main_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore/pgtest"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// BenchmarkReplicaThroughput measures, through the real binaries, how many
// conversations per second `orchestrator serve` creates and how many turns
// per second it serves: one replica on transcript files next to two
// replicas on one PostgreSQL, each against one toolsvc and the fake
// Messages API (which answers every request at once with a short text).
// Clients run in parallel (benchClients) and spread over the replicas; each
// creates benchSessions conversations, then runs one turn in each (a
// Converse stream: attach, user message, every event up to turn_complete).
//
// Reported: conversations/s and turns/s (wall time of the whole phase);
// run with -benchtime=1x.
func BenchmarkReplicaThroughput(b *testing.B) {
	for _, c := range []struct {
		name     string
		replicas int
		postgres bool
	}{
		{"files-1", 1, false},
		{"postgres-1", 1, true},
		{"postgres-2", 2, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			dsn := ""
			if c.postgres {
				dsn = pgtest.DSN(b)
			}
			toolsvc := startToolsvc(b, sandboxtest.Dir(b))
			fake, err := fakeapi.Start()
			if err != nil {
				b.Fatal(err)
			}
			defer fake.Close()
			fake.SetFallback(func(*fakeapi.Request) fakeapi.Reply {
				return fakeapi.EndTurn(fakeapi.Text("Done, in a few words of text."))
			})
			var clients []orchv1.OrchestratorServiceClient
			for i := range c.replicas {
				r := startReplica(b, fake, dsn, fmt.Sprintf("r%d", i), toolsvc)
				clients = append(clients, dial(b, r.addr))
			}
			for b.Loop() {
				created, turns := throughput(b, clients)
				b.ReportMetric(created, "conversations/s")
				b.ReportMetric(turns, "turns/s")
			}
		})
	}
}

const (
	benchClients  = 16
	benchSessions = 25 // per client
)

var benchRun atomic.Int64

func throughput(b *testing.B, clients []orchv1.OrchestratorServiceClient) (created, turns float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := benchRun.Add(1)
	id := func(c, i int) string { return fmt.Sprintf("bench-%d-%d-%d", run, c, i) }
	parallel := func(f func(c, i int) error) float64 {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, benchClients)
		for c := range benchClients {
			wg.Go(func() {
				for i := range benchSessions {
					if err := f(c, i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return float64(benchClients*benchSessions) / time.Since(start).Seconds()
	}
	created = parallel(func(c, i int) error {
		_, err := clients[(c+i)%len(clients)].CreateSession(ctx, &orchv1.CreateSessionRequest{SessionId: id(c, i), Config: &orchv1.SessionConfig{
			Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS},
		}})
		return err
	})
	// Each turn on another replica than the one that created the session.
	turns = parallel(func(c, i int) error {
		stream, err := clients[(c+i+1)%len(clients)].Converse(ctx)
		if err != nil {
			return err
		}
		_ = stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: id(c, i)}}})
		_ = stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: "hello"}}})
		_ = stream.CloseSend()
		done := false
		for {
			r, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if e := r.GetError(); e != nil {
				return fmt.Errorf("turn of %s: %s", id(c, i), e.GetMessage())
			}
			done = done || r.GetTurnComplete() != nil
		}
		if !done {
			return fmt.Errorf("turn of %s: no turn_complete", id(c, i))
		}
		return nil
	})
	return created, turns
}
