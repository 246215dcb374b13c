package execgrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/tool"
)

// prepTool is a Preparer: Prepare upper-cases its input's text and Run
// says what it was handed.
type prepTool struct{}

func (prepTool) Spec() tool.Spec {
	return tool.Spec{Name: "Prep", Description: "test tool", Concurrency: tool.ConcurrencyAlways,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}`)}
}
func (prepTool) ConcurrencySafe(json.RawMessage) bool { return true }
func (prepTool) Validate(context.Context, *tool.Env, json.RawMessage) error {
	return errors.New("Validate called")
}
func (prepTool) Prepare(_ context.Context, _ *tool.Env, input json.RawMessage) (any, error) {
	var in struct{ Text string }
	if err := json.Unmarshal(input, &in); err != nil || in.Text == "bad" {
		return nil, tool.Invalid("refused by Prepare")
	}
	return strings.ToUpper(in.Text), nil
}
func (prepTool) Run(_ context.Context, _ *tool.Env, c *tool.Call) *tool.Result {
	return tool.Text(fmt.Sprintf("prepared %v", c.Prepared))
}

// A Preparer's checks run in place of Validate, and what Prepare returned
// reaches Run with the input it was worked out from.
func TestPreparedReachesRun(t *testing.T) {
	h := newHarness(t, executor.Config{Tools: []tool.Tool{prepTool{}}})
	s := h.open(nil)
	s.useTool("p1", "m1", "Prep", `{"text":"abc"}`)
	if r := s.results(1)[0]; r.GetIsError() || text(r) != "prepared ABC" {
		t.Fatalf("result %v, want the prepared value", r)
	}
	s.useTool("p2", "m2", "Prep", `{"text":"bad"}`)
	if r := s.results(1)[0]; !r.GetIsError() || !strings.Contains(text(r), "refused by Prepare") {
		t.Fatalf("result %v, want Prepare's refusal", r)
	}
}
