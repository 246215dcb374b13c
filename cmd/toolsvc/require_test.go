package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// TestCallRequireSandbox: --require-sandbox refuses an executor whose
// Hello lacks a required protection, naming what is missing, before any
// call is sent; one that has them all runs the calls.
func TestCallRequireSandbox(t *testing.T) {
	in := `{"type":"tool_use","id":"w","name":"Bash","input":{"command":"echo ran > ran.txt"}}`
	cases := []struct {
		name    string
		args    []string
		code    int
		message string // in stderr when refused
	}{
		{"met", []string{"--require-sandbox", "landlock,network:none,process_group,clean_environment"}, 0, ""},
		{"no landlock, host network", []string{"--sandbox", "none", "--network", "host", "--require-sandbox", "landlock,network:none"}, 1,
			`toolsvc: --require-sandbox: the executor does not enforce what is required: landlock (landlock_fs and landlock_scope not in force); network:none (the network is "host") (it enforces `},
		{"allowlist meets allowlist", []string{"--network", "allowlist", "--require-sandbox", "network:allowlist,egress_allowlist"}, 0, ""},
		{"allowlist is not none", []string{"--network", "allowlist", "--require-sandbox", "network:none"}, 1,
			`toolsvc: --require-sandbox: the executor does not enforce what is required: network:none (the network is "allowlist")`},
		{"unknown word", []string{"--require-sandbox", "landlok"}, 2,
			`toolsvc call: --require-sandbox: unknown sandbox requirement "landlok" (known: landlock, file_roots, `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := sandboxtest.Dir(t)
			// The service profile: no network but loopback unless asked.
			cmd := exec.Command(toolsvcBin, append([]string{"call", "--embedded", "--profile", "service", "--root", root}, c.args...)...)
			cmd.Stdin = strings.NewReader(in)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, _ := cmd.Output()
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, out, stderr.String())
			}
			_, err := os.Stat(filepath.Join(root, "ran.txt"))
			if ran := err == nil; ran != (c.code == 0) {
				t.Errorf("the call ran: %v, want %v", ran, c.code == 0)
			}
			if c.message != "" && !strings.Contains(stderr.String(), c.message) {
				t.Errorf("stderr %q, want it to say %q", stderr.String(), c.message)
			}
		})
	}
}
