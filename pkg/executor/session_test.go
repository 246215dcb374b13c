package executor

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// gatedTool's calls wait until release is closed.
type gatedTool struct{ release chan struct{} }

func (g *gatedTool) Spec() tool.Spec {
	return tool.Spec{Name: "Gated", Description: "waits", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (g *gatedTool) ConcurrencySafe(json.RawMessage) bool                       { return false }
func (g *gatedTool) Validate(context.Context, *tool.Env, json.RawMessage) error { return nil }
func (g *gatedTool) Run(ctx context.Context, _ *tool.Env, _ *tool.Call) *tool.Result {
	<-g.release
	return tool.Text("done")
}

// A finished call leaves only its Result behind: the call itself (its
// input, span, context and channel) becomes garbage, or a busy session's
// heap would grow by all of that for each of the thousand finished calls
// it keeps to answer a repeated id.
func TestFinishedCallIsNotKept(t *testing.T) {
	gt := &gatedTool{release: make(chan struct{})}
	ex, err := New(Config{
		Tools:    []tool.Tool{gt},
		Operator: settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}},
		NewEnv: func(context.Context, EnvRequest) (*tool.Env, SandboxInfo, error) {
			ws, err := workspace.New(workspace.Config{Dir: t.TempDir()})
			if err != nil {
				return nil, SandboxInfo{}, err
			}
			env := &tool.Env{Files: ws, Limits: tool.Limits{}.WithDefaults(), Reads: tool.NewFileState()}
			env.OnClose(func() { _ = ws.Close() })
			return env, SandboxInfo{Backend: "none"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx := context.Background()
	s, err := ex.Open(ctx, OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, ToolUse{ID: "toolu_1", Name: "Gated", Input: `{}`}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	running := weak.Make(s.live["toolu_1"])
	s.mu.Unlock()
	if running.Value() == nil {
		t.Fatal("the call is not live while it runs")
	}
	close(gt.release)
	next, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ev, err := s.Next(next)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Result != nil {
			break
		}
	}
	for i := 0; i < 100 && running.Value() != nil; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if running.Value() != nil {
		t.Error("the session still holds the finished call")
	}
	s.mu.Lock()
	kept, ok := s.done["toolu_1"]
	s.mu.Unlock()
	if !ok || kept.result.Result.Content[0].Text != "done" {
		t.Errorf("the session does not keep the call's Result: %+v", kept)
	}
}
