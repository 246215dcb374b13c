package main_test

import (
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// A background launch is a Bash result like any other: it says is_error
// false, as Claude Code's do.
func TestCallBackgroundLaunchStatesIsError(t *testing.T) {
	in := `{"type":"tool_use","id":"bg","name":"Bash","input":{"command":"echo begun","run_in_background":true}}`
	rs := runCall(t, in, "--embedded", "--root", sandboxtest.Dir(t))
	content, _ := rs[0].Content.(string)
	if len(rs) != 1 || !strings.HasPrefix(content, "Command running in background with ID: ") {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].IsError == nil || *rs[0].IsError {
		t.Fatalf("is_error %v, want false stated", deref(rs[0].IsError))
	}
}
