package executor

import (
	"context"
	"encoding/json"

	"github.com/toolwire/toolwire/pkg/tool"
)

// gate is the permission and hook step of the pipeline: it runs after a
// call's validation and around the tool itself.
type gate struct{}

// before decides whether c may run. It returns the input to run with
// (hooks may rewrite it), what decided, and a Result when the call must not
// run.
func (g *gate) before(ctx context.Context, s *Session, c *call) (json.RawMessage, string, *tool.Result) {
	return c.input, "", nil
}

// after runs PostToolUse hooks on a finished call and returns its Result.
func (g *gate) after(ctx context.Context, s *Session, c *call, input json.RawMessage, res *tool.Result) *tool.Result {
	return res
}
