package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/tool"
)

// timeoutExitCode is what a timed-out command reports (SIGTERM's status in
// the shell's convention, as Claude Code reports it).
const timeoutExitCode = 143

// Tools returns the shell tools: Bash, TaskOutput, TaskStop and the hidden
// aliases BashOutput, KillShell and KillBash.
func Tools() []tool.Tool {
	return []tool.Tool{
		Bash{},
		TaskOutput{},
		TaskStop{},
		TaskOutput{alias: "BashOutput"},
		TaskStop{alias: "KillShell"},
		TaskStop{alias: "KillBash"},
	}
}

// Bash runs shell commands.
type Bash struct{}

type bashInput struct {
	Command                   string   `json:"command"`
	Timeout                   *float64 `json:"timeout"`
	Description               string   `json:"description"`
	RunInBackground           bool     `json:"run_in_background"`
	DangerouslyDisableSandbox bool     `json:"dangerouslyDisableSandbox"`
}

const bashDescription = `Runs a bash command and returns its output (stdout and stderr merged, in the order they were written).

- The working directory persists between calls as long as it stays inside the project; shell variables, exports and aliases do not.
- Quote paths that contain spaces. Prefer absolute paths over cd.
- timeout is in milliseconds: 2 minutes by default, at most 10 minutes. A command that runs longer is killed together with every process it started.
- Output longer than 30000 characters is saved to a file and replaced by a preview with the file's path.
- run_in_background starts the command and returns at once with a task id and an output file. Read that file (or call TaskOutput) to see progress, and TaskStop to end it; you are told when it finishes. Do not append "&" to background a command.
- Independent commands can be sent as parallel Bash calls; chain dependent ones with && in one call.
- Commands run in a sandbox with limited file-system and network access. dangerouslyDisableSandbox is accepted but has no effect: the sandbox is enforced by the executor, not by the caller.
- Use the dedicated tools for reading, editing and searching files rather than cat, sed or grep when they fit.`

// Spec describes Bash.
func (Bash) Spec() tool.Spec {
	return tool.Spec{
		Name:        "Bash",
		Description: bashDescription,
		InputSchema: bashSchema,
		Concurrency: tool.ConcurrencyDependsOnInput,
	}
}

// ConcurrencySafe reports whether the command only reads.
func (Bash) ConcurrencySafe(input json.RawMessage) bool {
	var in bashInput
	if json.Unmarshal(input, &in) != nil {
		return false
	}
	return !in.RunInBackground && readOnlyCommand(in.Command)
}

// Validate checks what the schema cannot.
func (Bash) Validate(ctx context.Context, env *tool.Env, input json.RawMessage) error {
	var in bashInput
	if err := json.Unmarshal(input, &in); err != nil {
		return tool.Invalid(err.Error())
	}
	if env.Procs == nil {
		return errors.New("shell: the session has no process runner")
	}
	return nil
}

// Run runs the command.
func (b Bash) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	var in bashInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return tool.UseError(tool.OutcomeInvalidInput, err.Error())
	}
	limits := env.Limits.WithDefaults()
	if in.RunInBackground {
		return startBackground(ctx, env, call, in)
	}
	timeout := limits.DefaultTimeout
	if in.Timeout != nil && *in.Timeout > 0 {
		timeout = min(time.Duration(*in.Timeout*float64(time.Millisecond)), limits.MaxTimeout)
	}
	if call.Timeout > 0 && call.Timeout < timeout {
		timeout = call.Timeout
	}
	return runForeground(ctx, env, call, in, timeout, limits)
}

// runForeground runs one command to its end, its timeout or the abort.
// Moved to the background (call.Background), it returns at once with the
// background task's launch Result and the command goes on as that task.
func runForeground(ctx context.Context, env *tool.Env, call *tool.Call, in bashInput, timeout time.Duration, limits tool.Limits) *tool.Result {
	command := in.Command
	start := time.Now()
	sh, err := prepareShell(env)
	if err != nil {
		return tool.Error(err.Error())
	}
	outName := fileName(call.ID) + ".txt"
	outPath := outputPath(env, outName)
	// Only a command that can change directory pays for reporting where it
	// ended (see mayChangeDir).
	var extraEnv []string
	cwdFile := ""
	if mayChangeDir(command) {
		cwdFile = filepath.Join(sh.dir, "cwd-"+fileName(call.ID))
		os.Remove(cwdFile)
		defer os.Remove(cwdFile)
		extraEnv = []string{"BASH_ENV=" + sh.bashEnv, "TOOLWIRE_CWD_FILE=" + cwdFile}
	}
	root, cwd := sh.root, env.Cwd()
	if cwd == "" || !isDir(cwd) {
		cwd = root
	}
	// The "process" span covers the sandboxed process from its start to its
	// reaping (global tracer: a no-op without telemetry.Setup).
	ctx, span := otel.Tracer("github.com/toolwire/toolwire/pkg/tools/shell").Start(ctx, "process")
	defer span.End()
	p, err := env.Procs.Start(ctx, sandbox.Cmd{
		Args: []string{sandbox.Shell, "-c", command},
		Dir:  cwd,
		Env:  extraEnv,
	})
	if err != nil {
		span.SetStatus(codes.Error, "the process did not start")
		if ctx.Err() != nil {
			return aborted()
		}
		return startError(err)
	}
	span.SetAttributes(semconv.ProcessPID(p.Pid()))
	// Output past 4 bytes per inline character is never returned inline
	// (see successText).
	capt := newCapture(limits.MaxOutputMemory, 4*min(limits.MaxOutputChars, 1<<28)+4<<10, func() (*os.File, error) { return createOutputFile(env, outName) })
	capt.quota = env.OutputQuota
	growPipe(p.Output())
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		capt.readFrom(p.Output())
	}()
	stopProgress, abortProgress := make(chan struct{}), make(chan struct{})
	reporter := &reporter{report: call.Progress}
	var progressWG sync.WaitGroup
	progressWG.Add(1)
	go func() {
		defer progressWG.Done()
		progressLoop(capt, reporter.send, limits.ProgressInterval, start, stopProgress, abortProgress)
	}()
	finish := func() {
		select {
		case <-readDone:
		case <-time.After(outputGrace):
			// A descendant that escaped the tree kill (possible only where
			// the runner falls back to process groups) still holds the
			// pipe: stop reading rather than wait for it.
			p.Output().Close()
			<-readDone
		}
		p.Output().Close()
		close(stopProgress)
		progressWG.Wait()
	}
	defer capt.closeFile()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	timedOut := false
	background := call.Background
	for running := true; running; {
		select {
		case <-p.Done():
			running = false
		case <-timer.C:
			timedOut, running = true, false
			p.Kill()
		case <-background:
			res := adopt(env, call, in, p, capt, readDone)
			if res == nil {
				// No task could be made (the session is ending, no output
				// file): the command stays in the foreground.
				background = nil
				continue
			}
			// The reader goes on into the task's output file; progress
			// ends here, with the call.
			close(abortProgress)
			close(stopProgress)
			reporter.close()
			span.SetAttributes(attribute.Bool("toolwire.backgrounded", true))
			return res
		case <-ctx.Done():
			// Abort: kill the tree and return at once. The runner reaps it,
			// and the goroutines reading output and reporting progress end
			// on their own; the reporter makes sure no progress goes out
			// after Run. Closing the output waits for its reader to let go,
			// so that happens beside the Result rather than before it.
			p.Abort()
			go p.Output().Close()
			close(abortProgress)
			close(stopProgress)
			reporter.close()
			return abortedWith(capt.snapshot(), limits.MaxOutputChars, outPath)
		}
	}
	code, werr := p.Wait()
	finish()
	span.SetAttributes(semconv.ProcessExitCode(code))
	if timedOut {
		span.SetAttributes(semconv.ErrorTypeKey.String("timeout"))
		span.SetStatus(codes.Error, "the command timed out")
	}
	if werr != nil {
		return tool.Error(fmt.Sprintf("shell: wait: %v", werr))
	}
	note := ""
	if cwdFile != "" {
		note = updateCwd(env, cwdFile, root)
	}
	snap := capt.snapshot()
	res := &tool.Result{StateIsError: true}
	var txt string
	switch {
	case timedOut:
		code = timeoutExitCode
		prefix := fmt.Sprintf("Exit code %d\nCommand timed out after %ds", code, int(timeout/time.Second))
		txt, res.Truncation = errorText(prefix, snap, limits.MaxOutputChars, outPath)
		res.IsError, res.Outcome = true, tool.OutcomeTimeout
	case code != 0:
		txt, res.Truncation = errorText(fmt.Sprintf("Exit code %d", code), snap, limits.MaxOutputChars, outPath)
		res.IsError = true
	default:
		txt, res.Truncation = successText(snap, limits.MaxOutputChars, outPath)
	}
	if res.IsError {
		txt = withNetworkNote(env, txt, snap, start)
	}
	if limit := p.LimitReached(); limit != "" {
		// A process or memory limit ended the command or part of it.
		if !res.IsError {
			txt = strings.TrimPrefix(txt, "(Bash completed with no output)")
		}
		txt = addLine(txt, limit)
		res.IsError = true
	}
	if hasQuota(env) && (res.IsError || strings.Contains(txt, "No space left on device") || strings.Contains(txt, "Disk quota exceeded")) {
		// A failure of a command whose temp directory or workspace is
		// full (or a write that failed in a command that went on): the
		// quota is the likely cause.
		for _, q := range quotaNotes(env) {
			txt = addLine(txt, q)
		}
	}
	if note != "" {
		if strings.HasPrefix(txt, "(Bash completed") {
			txt = note
		} else {
			txt += "\n" + note
		}
	}
	if res.Truncation != nil {
		// The result points at the whole output: make sure it is there.
		if _, err := capt.persist(); err != nil {
			// The output outgrew what the executor may write (a file size
			// limit, a full disk): the result keeps its head and tail and
			// says the rest is gone, rather than failing the call.
			txt = unsavedOutput(txt, outPath, err)
			res.Truncation.FullOutputPath = ""
		}
	}
	res.Content = []tool.Content{{Text: txt}}
	res.ExitCode = &code
	return res
}

// addLine adds a line to the end of a result's text.
func addLine(txt, line string) string {
	if txt = strings.TrimSuffix(txt, "\n"); txt == "" {
		return line
	}
	return txt + "\n" + line
}

// unsavedOutput rewrites a truncated result whose full output could not be
// saved to path so that it does not point at an incomplete file.
func unsavedOutput(txt, path string, err error) string {
	saved := "Full output saved to: " + path
	why := fmt.Sprintf("The full output could not be saved (%v)", err)
	if strings.Contains(txt, saved) {
		return strings.Replace(txt, saved, why, 1)
	}
	return txt + "\n\n(" + why + ".)"
}

// outputGrace is how long a finished call waits for the rest of its output
// once its process has exited or been killed.
const outputGrace = 500 * time.Millisecond

// aborted is the result of a call whose context ended first.
func aborted() *tool.Result {
	return &tool.Result{
		Content: []tool.Content{{Text: "Command aborted before it finished"}},
		IsError: true, StateIsError: true, Outcome: tool.OutcomeInterrupted,
	}
}

// abortedWith is the result of a command killed by an abort: its content
// is only what the command had printed until then (read so far: the abort
// does not wait for the rest), cut like the output of a failed command,
// and none when it printed nothing. The executor puts it under its own
// text saying why the call stopped.
func abortedWith(s snapshot, maxChars int, path string) *tool.Result {
	res := aborted()
	res.Content = nil
	if s.total == 0 {
		return res
	}
	txt, trunc := errorText("", s, maxChars, path)
	res.Content, res.Truncation = []tool.Content{{Text: strings.TrimPrefix(txt, "\n")}}, trunc
	return res
}

// startError turns a failed start into a result.
func startError(err error) *tool.Result {
	var pe *sandbox.PolicyError
	if errors.As(err, &pe) {
		return tool.UseError(tool.OutcomeSandboxDenied, pe.Msg)
	}
	return tool.Error(fmt.Sprintf("Failed to start the command: %v", err))
}

// updateCwd adopts the directory the shell ended in, unless it left the
// project, and returns the note to add to the result.
func updateCwd(env *tool.Env, cwdFile, root string) string {
	b, err := os.ReadFile(cwdFile)
	if err != nil {
		return "" // killed, or exec'd away: the directory stays
	}
	dir := strings.TrimRight(string(b), "\n")
	if dir == "" {
		return ""
	}
	if dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/") {
		env.SetCwd(dir)
		return ""
	}
	env.SetCwd(root)
	return "Shell cwd was reset to " + root
}

// shellSetup is per-session state of the Bash tool.
type shellSetup struct {
	root    string // project root: leaving it resets the cwd
	dir     string // scratch dir the sandbox user can write
	bashEnv string // start-up file that records the final cwd
}

type shellKey struct{}

// bashEnvScript runs before the command (bash sources $BASH_ENV). It hides
// itself from the command and arranges for the final working directory to
// be written where the tool reads it.
const bashEnvScript = `unset BASH_ENV
printf -v __toolwire_q %q "$TOOLWIRE_CWD_FILE"
trap -- "builtin pwd -P >| $__toolwire_q 2>/dev/null" EXIT
unset TOOLWIRE_CWD_FILE __toolwire_q
`

func prepareShell(env *tool.Env) (*shellSetup, error) {
	v := env.Value(shellKey{}, func() any {
		r := env.Procs
		s := &shellSetup{root: r.Workspace(), dir: r.TempDir()}
		if env.Files != nil && env.Files.Dir() != "" {
			if d, err := filepath.EvalSymlinks(env.Files.Dir()); err == nil {
				s.root = d
			}
		}
		s.bashEnv = filepath.Join(s.dir, ".toolwire-bash-env")
		if err := os.WriteFile(s.bashEnv, []byte(bashEnvScript), 0o644); err != nil {
			return fmt.Errorf("shell: write start-up file: %w", err)
		}
		return s
	})
	if err, ok := v.(error); ok {
		return nil, err
	}
	return v.(*shellSetup), nil
}

// outputPath returns the path of a file in the session's output directory.
func outputPath(env *tool.Env, name string) string {
	dir := env.OutputDir
	if dir == "" {
		dir = filepath.Join(env.Procs.TempDir(), "outputs")
	}
	return filepath.Join(dir, name)
}

// createOutputFile creates a file in the session's output directory, open
// for writing and for reading back.
func createOutputFile(env *tool.Env, name string) (*os.File, error) {
	path := outputPath(env, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("shell: output directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("shell: output file: %w", err)
	}
	return f, nil
}

// fileName makes an id safe as a file name.
func fileName(id string) string {
	if id == "" {
		id = "call"
	}
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, id)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
