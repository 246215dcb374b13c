// Package shell implements the shell tools: Bash (foreground and
// background commands), TaskOutput and TaskStop, and the older names
// BashOutput, KillShell and KillBash as hidden aliases.
//
// Commands run as "/bin/bash -c <command>" through the session's sandbox
// runner (tool.Env.Procs), which confines them and kills whole process
// trees. The package owns what the model sees: result formats, output caps,
// timeouts, the working directory that persists between calls, and the
// per-session registry of background shells. It does not decide whether a
// command may run; permissions belong to the executor.
//
// Why one package of this size (about 1,500 lines): Bash and the background
// shells share one registry and one output format, and TaskOutput and
// TaskStop act on that registry.
package shell
