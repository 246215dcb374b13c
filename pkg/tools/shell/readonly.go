package shell

import "github.com/toolwire/toolwire/pkg/bashcmd"

// readOnlyCommand reports whether a Bash command only reads, so that it may
// run beside other concurrency-safe calls. The classification lives in
// pkg/bashcmd; anything it cannot prove read-only counts as writing.
func readOnlyCommand(command string) bool { return bashcmd.ReadOnly(command) }
