package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Task statuses, as TaskOutput and notices report them.
const (
	statusRunning   = "running"
	statusCompleted = "completed"
	statusFailed    = "failed"
	statusKilled    = "killed"
)

const (
	defaultWait = 30 * time.Second
	maxWait     = 10 * time.Minute
)

// task is one background shell.
type task struct {
	id, command, summaryName, toolUseID, outPath string
	proc                                         *sandbox.Process
	done                                         chan struct{} // closed once status is final

	mu       sync.Mutex // guards the fields below
	status   string
	exitCode *int
}

func (t *task) state() (string, *int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status, t.exitCode
}

// registry holds a session's background shells.
type registry struct {
	closeOnce sync.Once
	wg        sync.WaitGroup // one per running task's watcher

	mu     sync.Mutex // guards the fields below
	tasks  map[string]*task
	closed bool
}

type registryKey struct{}

// tasksOf returns the session's registry, creating it (and its cleanup at
// session end) on first use.
func tasksOf(env *tool.Env) *registry {
	reg := env.Value(registryKey{}, func() any {
		return &registry{tasks: make(map[string]*task)}
	}).(*registry)
	// Outside Value's create: OnClose takes the same lock.
	reg.closeOnce.Do(func() { env.OnClose(reg.closeAll) })
	return reg
}

func (r *registry) get(id string) *task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[id]
}

func (r *registry) remove(id string) {
	r.mu.Lock()
	delete(r.tasks, id)
	r.mu.Unlock()
}

// closeAll kills every background shell and waits for them.
func (r *registry) closeAll() {
	r.mu.Lock()
	r.closed = true
	tasks := make([]*task, 0, len(r.tasks))
	for _, t := range r.tasks {
		tasks = append(tasks, t)
	}
	r.mu.Unlock()
	for _, t := range tasks {
		t.proc.Abort()
	}
	r.wg.Wait()
}

// newTaskID returns "b" and 8 random lowercase letters and digits.
func newTaskID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	rand.Read(b[:])
	id := []byte{'b'}
	for _, x := range b {
		id = append(id, alphabet[int(x)%len(alphabet)])
	}
	return string(id)
}

// startBackground starts a background shell and returns at once.
func startBackground(ctx context.Context, env *tool.Env, call *tool.Call, in bashInput) *tool.Result {
	reg := tasksOf(env)
	id := newTaskID()
	outPath := outputPath(env, id+".output")
	outFile, err := createOutputFile(env, id+".output")
	if err != nil {
		return tool.Error(err.Error())
	}
	cwd := env.Cwd()
	if cwd == "" || !isDir(cwd) {
		cwd = env.Procs.Workspace()
	}
	reg.mu.Lock()
	if reg.closed {
		reg.mu.Unlock()
		outFile.Close()
		return tool.Error("The session is ending; no background command was started")
	}
	p, err := env.Procs.Start(ctx, sandbox.Cmd{Args: []string{sandbox.Shell, "-c", in.Command}, Dir: cwd})
	if err != nil {
		reg.mu.Unlock()
		outFile.Close()
		return startError(err)
	}
	t := reg.addLocked(id, call, in, outPath, p)
	reg.mu.Unlock()
	go watch(env, reg, t, outFile)
	return launched(id, outPath)
}

// addLocked registers the running task id, whose watcher the caller
// starts (it calls reg.wg.Done). reg.mu is held.
func (reg *registry) addLocked(id string, call *tool.Call, in bashInput, outPath string, p *sandbox.Process) *task {
	name := in.Description
	if name == "" {
		name = in.Command
	}
	t := &task{id: id, command: in.Command, summaryName: name, toolUseID: call.ID, outPath: outPath,
		proc: p, done: make(chan struct{}), status: statusRunning}
	reg.tasks[id] = t
	reg.wg.Add(1)
	return t
}

// launched is the Result of a command that runs in the background, in
// Claude Code's words.
func launched(id, outPath string) *tool.Result {
	res := tool.Text(fmt.Sprintf("Command running in background with ID: %s. Output is being written to: %s. "+
		"You will be notified when it completes. To check interim output, use Read on that file path.", id, outPath))
	res.StateIsError = true // every Bash result says is_error, a launch too
	return res
}

// adopt makes a running foreground command a background task, as the
// client asked: its process tree goes on as it is, with its limits, the
// output so far and from now on goes to the task's output file, and the
// task is watched and announced like any other. It returns the call's
// Result, or nil when no task could be made (the session is ending, the
// output file could not be created): the command stays in the foreground.
func adopt(env *tool.Env, call *tool.Call, in bashInput, p *sandbox.Process, capt *capture, readDone <-chan struct{}) *tool.Result {
	reg := tasksOf(env)
	id := newTaskID()
	outPath := outputPath(env, id+".output")
	outFile, err := createOutputFile(env, id+".output")
	if err != nil {
		return nil
	}
	reg.mu.Lock()
	if reg.closed {
		reg.mu.Unlock()
		outFile.Close()
		return nil
	}
	capt.handOff(outFile)
	t := reg.addLocked(id, call, in, outPath, p)
	reg.mu.Unlock()
	go func() {
		defer reg.wg.Done()
		<-readDone // the capture's reader, writing to outFile, got EOF
		p.Output().Close()
		outFile.Close()
		settle(env, reg, t, nil)
	}()
	return launched(id, outPath)
}

// watch copies a task's output to its file and records how it ended.
func watch(env *tool.Env, reg *registry, t *task, outFile *os.File) {
	defer reg.wg.Done()
	var limits []string
	if err := copyOutput(outFile, t.proc.Output(), env.OutputQuota); err != nil {
		// The output file cannot grow: the command is stopped rather
		// than left writing where nobody can read it.
		t.proc.Abort()
		io.Copy(io.Discard, t.proc.Output())
		limits = append(limits, fmt.Sprintf("Output stopped: %v; the command was killed.", unwrapWrite(err)))
	}
	t.proc.Output().Close()
	outFile.Close()
	settle(env, reg, t, limits)
}

// settle records how a task's process ended, once its output is in its
// file, with the limits that stopped it, and announces it.
func settle(env *tool.Env, reg *registry, t *task, limits []string) {
	code, _ := t.proc.Wait()
	if l := t.proc.LimitReached(); l != "" {
		limits = append(limits, l)
	}
	limits = append(limits, quotaNotes(env)...)
	limit := strings.Join(limits, " ")
	if limit != "" {
		appendNote(t.outPath, limit)
	}
	t.mu.Lock()
	killed := t.status == statusKilled
	if !killed {
		t.status = statusCompleted
		if code != 0 || limit != "" {
			t.status = statusFailed
		}
		t.exitCode = &code
	}
	status := t.status
	t.mu.Unlock()
	// The notice goes out before done closes, so whoever sees the task
	// finished (a blocking TaskOutput) sees it after the notice.
	defer close(t.done)
	reg.mu.Lock()
	closing := reg.closed
	reg.mu.Unlock()
	if killed || closing || env.Notify == nil {
		return
	}
	summary := fmt.Sprintf(`Background command "%s" completed (exit code %d)`, t.summaryName, code)
	if status == statusFailed {
		summary = fmt.Sprintf(`Background command "%s" failed with exit code %d`, t.summaryName, code)
	}
	if limit != "" {
		summary += ": " + limit
	}
	env.Notify(tool.TaskNotice{TaskID: t.id, ToolUseID: t.toolUseID, OutputPath: t.outPath,
		Status: status, ExitCode: &code, Summary: summary})
}

// copyOutput copies a background command's output to its file while the
// session's output quota has room, and returns why it stopped early: the
// quota, or a write error such as ENOSPC; nil at the output's end.
func copyOutput(dst *os.File, src io.Reader, q *tool.ByteQuota) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if qerr := q.Take(int64(n)); qerr != nil {
				return qerr
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return nil
		}
	}
}

// unwrapWrite shortens a write error to its cause ("no space left on
// device"), which says more than the path.
func unwrapWrite(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("writing the output file: %w", pe.Err)
	}
	return err
}

// appendNote adds a line that says why a background command ended to the
// end of its output file.
func appendNote(path, note string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "\n[toolwire] %s\n", note)
}

// TaskOutput reports a background shell's status and output. With alias
// "BashOutput" it takes bash_id and filter instead.
type TaskOutput struct{ alias string }

type taskOutputInput struct {
	TaskID  string   `json:"task_id"`
	BashID  string   `json:"bash_id"`
	Block   *bool    `json:"block"`
	Timeout *float64 `json:"timeout"`
	Filter  string   `json:"filter"`
}

func (t TaskOutput) parse(input json.RawMessage) (taskOutputInput, error) {
	var in taskOutputInput
	if err := json.Unmarshal(input, &in); err != nil {
		return in, tool.Invalid(err.Error())
	}
	if t.alias != "" {
		in.TaskID = in.BashID
	}
	return in, nil
}

// Spec describes TaskOutput or its alias.
func (t TaskOutput) Spec() tool.Spec {
	s := tool.Spec{
		Name: "TaskOutput",
		Description: "DEPRECATED: prefer the Read tool on the output file path that Bash returned for a background command.\n\n" +
			"Returns the status of a background task and, once it has finished, its exit code and output.\n" +
			"- block (default true) waits for the task to finish, up to timeout milliseconds (default 30000).\n" +
			"- With block false it answers at once; a running task is reported as not ready.",
		InputSchema: taskOutputSchema,
		ReadOnly:    true,
		Concurrency: tool.ConcurrencyAlways,
	}
	if t.alias != "" {
		s.Name, s.Hidden, s.AliasOf, s.InputSchema = t.alias, true, s.Name, bashOutputSchema
		s.Description = "Older name of TaskOutput: returns a background shell's status and output; filter keeps only lines matching a regular expression."
	}
	return s
}

// ConcurrencySafe is always true: reading a task's output changes nothing.
func (TaskOutput) ConcurrencySafe(json.RawMessage) bool { return true }

// Validate checks the id and the filter.
func (t TaskOutput) Validate(ctx context.Context, env *tool.Env, input json.RawMessage) error {
	in, err := t.parse(input)
	if err != nil {
		return err
	}
	if in.TaskID == "" {
		return tool.Invalid("Missing required parameter: task_id")
	}
	if tasksOf(env).get(in.TaskID) == nil {
		return tool.Invalid("No task found with ID: " + in.TaskID)
	}
	if in.Filter != "" {
		if _, err := regexp.Compile(in.Filter); err != nil {
			return tool.Invalid("Invalid regular expression in filter: " + err.Error())
		}
	}
	return nil
}

// Run reports the task, waiting for it first when asked to.
func (t TaskOutput) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	in, err := t.parse(call.Input)
	if err != nil {
		return tool.UseError(tool.OutcomeInvalidInput, err.Error())
	}
	tk := tasksOf(env).get(in.TaskID)
	if tk == nil {
		return tool.UseError(tool.OutcomeToolError, "No task found with ID: "+in.TaskID)
	}
	block := in.Block == nil || *in.Block
	wait := defaultWait
	if in.Timeout != nil {
		wait = min(max(time.Duration(*in.Timeout*float64(time.Millisecond)), 0), maxWait)
	}
	retrieval := "success"
	if block {
		timer := time.NewTimer(wait)
		select {
		case <-tk.done:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	status, code := tk.state()
	if status == statusRunning {
		retrieval = "not_ready"
		if block {
			retrieval = "timeout"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<retrieval_status>%s</retrieval_status>\n\n<task_id>%s</task_id>\n\n<task_type>local_bash</task_type>\n\n<status>%s</status>",
		retrieval, tk.id, status)
	if status != statusRunning {
		if code != nil {
			fmt.Fprintf(&b, "\n\n<exit_code>%d</exit_code>", *code)
		}
		out := readTaskOutput(tk.outPath, in.Filter, env.Limits.WithDefaults().MaxOutputChars)
		if out != "" {
			if !strings.HasSuffix(out, "\n") {
				out += "\n"
			}
			fmt.Fprintf(&b, "\n\n<output>\n%s</output>", out)
		}
	}
	return tool.Text(b.String())
}

// readTaskOutput returns a task's output file as text: the lines matching
// filter if one is given, and only the last maxChars characters.
func readTaskOutput(path, filter string, maxChars int) string {
	raw, err := readTail(path, int64(maxChars)*utf8.UTFMax)
	if err != nil {
		return fmt.Sprintf("[output file unreadable: %v]\n", err)
	}
	s := text(raw)
	if filter != "" {
		re := regexp.MustCompile(filter)
		var kept []string
		for _, line := range strings.SplitAfter(s, "\n") {
			if line != "" && re.MatchString(strings.TrimRight(line, "\n")) {
				kept = append(kept, line)
			}
		}
		s = strings.Join(kept, "")
	}
	if r := []rune(s); len(r) > maxChars {
		s = fmt.Sprintf("[earlier output omitted; the whole output is in %s]\n", path) + string(r[len(r)-maxChars:])
	}
	return s
}

// readTail reads at most n bytes from the end of a file.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return nil, err
	}
	if off > 0 {
		// Start at a line boundary when one is near.
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < 4096 {
			b = b[i+1:]
		}
	}
	return b, nil
}

// TaskStop stops a background shell. With alias "KillShell" or "KillBash"
// it takes shell_id.
type TaskStop struct{ alias string }

type taskStopInput struct {
	TaskID  string `json:"task_id"`
	ShellID string `json:"shell_id"`
}

// parseStop returns the task id, taken from task_id or else shell_id.
func parseStop(input json.RawMessage) (string, error) {
	var in taskStopInput
	if err := json.Unmarshal(input, &in); err != nil {
		return "", tool.Invalid(err.Error())
	}
	if in.TaskID != "" {
		return in.TaskID, nil
	}
	return in.ShellID, nil
}

// Spec describes TaskStop or its alias.
func (t TaskStop) Spec() tool.Spec {
	s := tool.Spec{
		Name: "TaskStop",
		Description: "Stops a running background task by its id, killing the command and every process it started.\n" +
			"Use it for long-running commands that are no longer needed.",
		InputSchema: taskStopSchema,
		Concurrency: tool.ConcurrencyAlways,
	}
	if t.alias != "" {
		s.Name, s.Hidden, s.AliasOf, s.InputSchema = t.alias, true, s.Name, killShellSchema
		s.Description = "Older name of TaskStop: stops a background shell by its id."
	}
	return s
}

// ConcurrencySafe is true: stopping a task touches only that task.
func (TaskStop) ConcurrencySafe(json.RawMessage) bool { return true }

// Validate checks that the id names a running task.
func (TaskStop) Validate(ctx context.Context, env *tool.Env, input json.RawMessage) error {
	id, err := parseStop(input)
	if err != nil {
		return err
	}
	if id == "" {
		return tool.Invalid("Missing required parameter: task_id")
	}
	tk := tasksOf(env).get(id)
	if tk == nil {
		return tool.Invalid("No task found with ID: " + id)
	}
	if status, _ := tk.state(); status != statusRunning {
		return tool.Invalid(fmt.Sprintf("Task %s is not running (status: %s)", id, status))
	}
	return nil
}

// Run stops the task and forgets it.
func (TaskStop) Run(ctx context.Context, env *tool.Env, call *tool.Call) *tool.Result {
	id, err := parseStop(call.Input)
	if err != nil {
		return tool.UseError(tool.OutcomeInvalidInput, err.Error())
	}
	reg := tasksOf(env)
	tk := reg.get(id)
	if tk == nil {
		return tool.UseError(tool.OutcomeToolError, "No task found with ID: "+id)
	}
	tk.mu.Lock()
	wasRunning := tk.status == statusRunning
	if wasRunning {
		tk.status = statusKilled
	}
	tk.mu.Unlock()
	if !wasRunning {
		return tool.UseError(tool.OutcomeToolError, fmt.Sprintf("Task %s is not running", id))
	}
	tk.proc.Kill()
	<-tk.done
	reg.remove(id)
	if env.Notify != nil {
		env.Notify(tool.TaskNotice{TaskID: tk.id, ToolUseID: tk.toolUseID, OutputPath: tk.outPath,
			Status: statusKilled, Summary: fmt.Sprintf(`Background command "%s" was stopped`, tk.summaryName)})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(struct {
		Message  string `json:"message"`
		TaskID   string `json:"task_id"`
		TaskType string `json:"task_type"`
		Command  string `json:"command"`
	}{fmt.Sprintf("Successfully stopped task: %s (%s)", tk.id, tk.command), tk.id, "local_bash", tk.command})
	return tool.Text(strings.TrimSuffix(b.String(), "\n"))
}
