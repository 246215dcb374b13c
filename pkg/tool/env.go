package tool

import (
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Limits are the caps tools apply. Zero fields take the defaults below.
type Limits struct {
	// DefaultTimeout applies to Bash calls that give none.
	DefaultTimeout time.Duration
	// MaxTimeout is the largest Bash timeout honoured.
	MaxTimeout time.Duration
	// MaxOutputChars is how much Bash output is returned inline.
	MaxOutputChars int
	// MaxReadBytes is the largest file Read returns without offset/limit.
	MaxReadBytes int64
	// MaxOutputMemory is how many bytes of one call's output are held in
	// memory; the rest goes to the output file only.
	MaxOutputMemory int
	// ProgressInterval is the shortest time between two Progress events of
	// a call.
	ProgressInterval time.Duration
	// MaxCheckpointBytes bounds the previous file content a session's
	// checkpoints keep (pkg/checkpoint); zero is its default.
	MaxCheckpointBytes int64
	// WebFetchTimeout bounds one WebFetch: connecting, redirects and
	// reading the page.
	WebFetchTimeout time.Duration
}

// Default limits, matching Claude Code where it has one.
const (
	DefaultTimeout          = 2 * time.Minute
	DefaultMaxTimeout       = 10 * time.Minute
	DefaultMaxOutputChars   = 30000
	DefaultMaxReadBytes     = 256 * 1024
	DefaultMaxOutputMemory  = 8 << 20
	DefaultProgressInterval = 50 * time.Millisecond
	DefaultWebFetchTimeout  = 60 * time.Second
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.DefaultTimeout <= 0 {
		l.DefaultTimeout = DefaultTimeout
	}
	if l.MaxTimeout <= 0 {
		l.MaxTimeout = DefaultMaxTimeout
	}
	if l.MaxTimeout < l.DefaultTimeout {
		l.MaxTimeout = l.DefaultTimeout
	}
	if l.MaxOutputChars <= 0 {
		l.MaxOutputChars = DefaultMaxOutputChars
	}
	if l.MaxReadBytes <= 0 {
		l.MaxReadBytes = DefaultMaxReadBytes
	}
	if l.MaxOutputMemory <= 0 {
		l.MaxOutputMemory = DefaultMaxOutputMemory
	}
	if l.ProgressInterval <= 0 {
		l.ProgressInterval = DefaultProgressInterval
	}
	if l.WebFetchTimeout <= 0 {
		l.WebFetchTimeout = DefaultWebFetchTimeout
	}
	return l
}

// Env is the per-session state tools share. One Env lives as long as its
// session; tools of the session may use it from many goroutines.
type Env struct {
	// SessionID identifies the session.
	SessionID string
	// Files gives traversal-safe access to the session's allowed roots.
	Files *workspace.Workspace
	// AddDirs are directories the session works in besides the workspace
	// (--add-dir); permission modes treat them as the workspace.
	AddDirs []string
	// Procs starts confined processes for the session.
	Procs *sandbox.Runner
	// Egress is the session's egress proxy when its network is
	// "allowlist" (the only way its processes reach the network); nil
	// otherwise.
	Egress *egress.Proxy
	// Web is what the executor's own web requests (WebFetch) may reach
	// for this session: with network "allowlist" the session's egress
	// policy, with "host" every host but the denied domains (loopback,
	// private and link-local addresses only where the operator lists
	// them); nil with "none", which lets WebFetch reach nothing.
	Web *egress.Policy
	// TempDir is the session's private scratch directory (also TMPDIR of
	// its processes).
	TempDir string
	// OutputDir holds full outputs of shortened results and background
	// shells; Read can open files there, and processes may read them. It
	// may outlast the session (execsvc.Config.OutputRoot), so that the
	// paths results give stay valid for the conversation.
	OutputDir string
	// OutputQuota bounds the bytes of the files saved in OutputDir for
	// the session (whole outputs, background commands' output); nil is
	// unlimited.
	OutputQuota *ByteQuota
	// TempQuota is the size of the file system of TempDir when the
	// executor gave the session one of its own (0: none); a command that
	// fills it gets ENOSPC, and its result says so.
	TempQuota int64
	// Workspace, when the executor made the session's workspace with a
	// disk quota of its own, reports the bytes the workspace takes and its
	// quota, as the file system last accounted them (ok false when it
	// cannot tell); nil without a quota. A command that fails with the
	// workspace full gets EDQUOT, and its result says so.
	Workspace func() (used, limit int64, ok bool)
	// Limits are the caps of this session.
	Limits Limits
	// Reads records which files the model has read.
	Reads *FileState
	// Notify tells the client that a background task finished. Set by the
	// executor; nil means nobody listens.
	Notify func(TaskNotice)

	mu      sync.Mutex // guards the fields below
	cwd     string
	values  map[any]any
	closers []func()
	closed  bool
}

// TaskNotice reports the end of a background task.
type TaskNotice struct {
	// TaskID is the background task id.
	TaskID string
	// ToolUseID is the tool_use that started the task.
	ToolUseID string
	// OutputPath is the task's output file.
	OutputPath string
	// Status is "completed", "failed" or "killed".
	Status string
	// ExitCode is set when the task exited.
	ExitCode *int
	// Summary is one line for the model.
	Summary string
}

// Cwd returns the working directory of the session's shell.
func (e *Env) Cwd() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cwd == "" && e.Files != nil {
		return e.Files.Dir()
	}
	return e.cwd
}

// SetCwd changes the working directory of the session's shell.
func (e *Env) SetCwd(dir string) {
	e.mu.Lock()
	e.cwd = dir
	e.mu.Unlock()
}

// Value returns the session value stored under key, creating it with create
// on first use. Tool packages keep their own per-session state this way,
// under an unexported key type.
func (e *Env) Value(key any, create func() any) any {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.values[key]; ok {
		return v
	}
	if e.values == nil {
		e.values = make(map[any]any)
	}
	v := create()
	e.values[key] = v
	return v
}

// OnClose registers f to run when the session ends, in reverse order of
// registration. If the session already ended, f runs at once.
func (e *Env) OnClose(f func()) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		f()
		return
	}
	e.closers = append(e.closers, f)
	e.mu.Unlock()
}

// Close runs the functions registered with OnClose. It is idempotent.
func (e *Env) Close() {
	e.mu.Lock()
	closers := e.closers
	e.closers, e.closed = nil, true
	e.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}
