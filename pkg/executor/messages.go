package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
)

// abortCause is the context cause of an aborted call.
type abortCause struct {
	reason AbortReason
	// by is the sibling call whose failure caused a sibling abort.
	by string
}

func (c *abortCause) Error() string {
	if c.by != "" {
		return fmt.Sprintf("%s (caused by %s)", c.reason, c.by)
	}
	return c.reason.String()
}

// errCallTimeout is the context cause of a call that ran past the client's
// per-call timeout.
var errCallTimeout = errors.New("call timeout")

// interruptedResult returns the synthetic result of a call stopped by cause.
func interruptedResult(cause error) *tool.Result {
	var ac *abortCause
	if !errors.As(cause, &ac) {
		ac = &abortCause{reason: AbortShutdown}
	}
	switch ac.reason {
	case AbortSiblingError:
		return tool.UseError(tool.OutcomeSiblingError,
			fmt.Sprintf("Cancelled: a parallel Bash call of the same message (%s) failed, so this call was stopped before it finished.", ac.by))
	case AbortStreamingFallback:
		return tool.UseError(tool.OutcomeInterrupted,
			"Error: the model's response stream failed, so this tool call was discarded without running to completion.")
	case AbortShutdown:
		return tool.UseError(tool.OutcomeInterrupted,
			"Interrupted: the executor ended this session (shutdown or disconnect) before the call finished.")
	case AbortTimeout:
		return tool.UseError(tool.OutcomeTimeout, "The tool call ran past its timeout and was stopped.")
	default:
		return tool.UseError(tool.OutcomeInterrupted,
			"Interrupted by the user: this tool call was stopped before it finished and may have had partial effects.")
	}
}

// withPartialOutput adds to stopped, the result of an aborted call, what
// its tool reported when the abort stopped it (a Bash command's output
// until then), so that the model sees how far the call got.
func withPartialOutput(stopped, res *tool.Result) *tool.Result {
	if res == nil || res.FinalOutcome() != tool.OutcomeInterrupted || stopped.FinalOutcome() != tool.OutcomeInterrupted {
		return stopped
	}
	if out := res.TextContent(); out != "" {
		stopped.Content = []tool.Content{{Text: stopped.TextContent() + "\n" + out}}
		stopped.Truncation = res.Truncation
		stopped.StateIsError = res.StateIsError
	}
	return stopped
}

// timeoutResult is the result of a non-Bash call that ran past the client's
// per-call timeout.
func timeoutResult(d time.Duration) *tool.Result {
	return tool.UseError(tool.OutcomeTimeout, fmt.Sprintf("The tool call timed out after %s and was stopped.", d.Round(time.Millisecond)))
}

// panicResult is the result of a tool that panicked.
func panicResult(name string, v any) *tool.Result {
	return tool.UseError(tool.OutcomeInternalError,
		fmt.Sprintf("Internal error: the %s tool failed unexpectedly (%v). This is a bug in the executor, not in your input.", name, v))
}
