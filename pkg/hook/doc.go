// Package hook runs Claude Code's PreToolUse and PostToolUse hooks: shell
// commands the user configures to see, veto, rewrite or follow up on a tool
// call.
//
// A Set is compiled once from the hooks section of the settings (Compile)
// and asked, per call, which commands match the tool (Matching) or to run
// them (Run). Every matching command runs at once, each as
// "/bin/bash -c <command>" through the session's sandbox.Runner, so a hook
// is confined exactly like the Bash tool: same user, same Landlock domain,
// same network namespace, same whole-tree kill. It gets the event as JSON on
// stdin (see Input), the session's current directory as its working
// directory and CLAUDE_PROJECT_DIR naming the workspace.
//
// What a hook says is read the way Claude Code reads it:
//
//   - exit code 0: the call proceeds; stdout may hold a JSON object with a
//     decision (see Outcome);
//   - exit code 2: the call is blocked (PreToolUse) or the model is told
//     (PostToolUse), with the hook's stderr as the reason;
//   - any other exit code, a failed start or a timeout: a non-blocking
//     error, reported in Outcome.Errors for the caller to log.
//
// The results of parallel hooks are combined into one Outcome: any block or
// deny wins over ask, which wins over allow, and the reasons are joined in
// configuration order. When several hooks rewrite the input, the last one in
// configuration order wins, whatever order they finished in.
//
// The package does not decide permissions, does not parse settings files
// and does not format tool results: it reports what the hooks said, and the
// executor applies it.
//
// Why one package of this size (about 800 lines): matching, the hook's
// input, running the command and reading its outcome are Claude Code's
// hook protocol end to end; each is one file.
package hook
