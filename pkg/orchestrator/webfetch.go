package orchestrator

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/tool"
)

// WebFetch's second half. The executor fetches the page and returns it as
// Markdown; the model that called WebFetch gets, as Claude Code does, not
// the page but a small, fast model's answer to the call's prompt about
// it. That answer is made here, through the same Messages client, before
// the result is delivered: the call stays pending meanwhile, so the turn
// waits for it, an interrupt ends it like any call, and the tool_use
// still gets exactly one tool_result.

// webFetchTool is the tool whose results get the prompt applied.
const webFetchTool = "WebFetch"

// webFetchMaxTokens bounds the small model's answer.
const webFetchMaxTokens = 4096

// webFetchPage is what the orchestrator reads of a WebFetch result's
// structured data (pkg/tools/web's Structured): a redirect to another
// host is passed on as it is.
type webFetchPage struct {
	URL      string `json:"url"`
	Redirect string `json:"redirect"`
}

// deliverResult hands an executor's result to the calls waiting for it;
// a WebFetch page first gets its prompt answered.
func (s *Session) deliverResult(cs *callSet, r *execapi.CallResult, announce func(*execapi.CallResult)) {
	if prompt, ok := webFetchPrompt(cs, r); ok {
		c, claimed := cs.claim(r.ToolUseID)
		if !claimed {
			return // a copy of a result already being answered
		}
		go s.applyPrompt(cs, c, r, prompt, announce)
		return
	}
	cs.deliver(r, announce)
}

// webFetchPrompt returns the prompt of a WebFetch call whose result is a
// page.
func webFetchPrompt(cs *callSet, r *execapi.CallResult) (string, bool) {
	if r.ToolName != webFetchTool || r.Result == nil || r.IsError || len(r.Structured) == 0 {
		return "", false
	}
	var p webFetchPage
	if json.Unmarshal(r.Structured, &p) != nil || p.URL == "" || p.Redirect != "" {
		return "", false
	}
	c := cs.get(r.ToolUseID)
	if c == nil {
		return "", false
	}
	var in struct {
		Prompt string `json:"prompt"`
	}
	if json.Unmarshal([]byte(c.use.Input), &in) != nil {
		return "", false
	}
	return in.Prompt, true
}

// applyPrompt asks the small model the call's prompt about the page and
// delivers its answer as the call's result; a failure is an is_error
// result. The request ends with the turn: an interrupt gives the call an
// interrupted result.
func (s *Session) applyPrompt(cs *callSet, c *call, r *execapi.CallResult, prompt string, announce func(*execapi.CallResult)) {
	ctx := trace.ContextWithSpan(cs.ctx, c.span)
	modelName := s.o.cfg.WebFetchModel
	if modelName == "" {
		modelName = model.DefaultSmallModel
	}
	resp, err := s.o.cfg.Model.Stream(ctx, model.Request{
		Model:          modelName,
		MaxTokens:      webFetchMaxTokens,
		ThinkingBudget: -1,
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{
			model.TextBlock(webFetchRequest(r.TextContent(), prompt)),
		}}},
	}, nil)
	out := *r.Result
	switch {
	case err != nil:
		if cs.ctx.Err() != nil {
			// Interrupted: the call ends like the executor's aborted
			// calls, without waiting out the abort's grace period.
			cs.deliver(syntheticResult(r.ToolUseID, r.ToolName, textInterrupted), announce)
			return
		}
		out = *tool.Error(fmt.Sprintf("WebFetch fetched the page, but answering the prompt about it failed: %v", err))
		out.Structured = r.Structured
	default:
		answer := strings.TrimSpace(resp.Message().Text())
		if answer == "" {
			answer = "(The model that read the page gave no answer.)"
		}
		out.Content = []tool.Content{{Text: answer}}
	}
	res := *r
	res.Result = &out
	cs.deliver(&res, announce)
}

// webFetchRequest is the small model's request: the page, then the
// prompt, with what Claude Code asks of such an answer.
func webFetchRequest(page, prompt string) string {
	return "Web page content:\n---\n" + page + "\n---\n\n" + prompt + "\n\n" +
		"Answer from the page above only, concisely. Quote exactly where the wording matters (code, commands, error messages), " +
		"keep quotations short, and say so when the page does not contain what is asked."
}
