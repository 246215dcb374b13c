package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/model"
)

// Error classes of the orchestrator; the gRPC edge maps them to status codes.
var (
	// ErrNotFound: no session has that id.
	ErrNotFound = errors.New("session not found")
	// ErrExists: a session with that id exists already.
	ErrExists = errors.New("session already exists")
	// ErrBusy: the session is running a turn.
	ErrBusy = errors.New("session is busy with a turn")
	// ErrInvalid: a request or configuration is malformed.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the orchestrator or session is shut down.
	ErrClosed = errors.New("closed")
	// ErrExecutorUnavailable: the executor could not be reached.
	ErrExecutorUnavailable = errors.New("executor unavailable")
)

// Dialer returns a client for the executor at addr. The orchestrator calls
// it with Config.DefaultExecutor when a session names none.
type Dialer func(ctx context.Context, addr string) (executorv1.ExecutorServiceClient, error)

// Placer chooses the executor of each new session when an executor
// address names a pool of executors (cmd/orchestrator backs it with
// pkg/execpool). Sessions stick to the executor they were placed on.
type Placer interface {
	// Place returns the executor for a new session whose executor address
	// is target, and a release to call when the session ends. A target that
	// is not a pool comes back unchanged.
	Place(ctx context.Context, target string) (addr string, release func(), err error)
	// Hold counts a session already placed on addr from pool target (one
	// loaded from the store after a restart) and returns its release.
	Hold(target, addr string) (release func())
	// Leaving reports whether addr, a member of pool target, is known to
	// take no more work: its health says it is draining, or it cannot be
	// reached.
	Leaving(target, addr string) bool
}

// PermissionFunc answers a permission request without a client, e.g. in
// headless mode. Returning nil leaves the request to the attached client.
type PermissionFunc func(sessionID string, req *executorv1.PermissionRequest) *executorv1.PermissionDecision

// Defaults of Config.
const (
	DefaultMaxTurns     = 100
	DefaultAbortGrace   = 10 * time.Second
	DefaultResumeWindow = 30 * time.Second
	defaultEventBacklog = 1 << 16
)

// Config configures an Orchestrator.
type Config struct {
	// Model is the client for the Messages API. Required.
	Model *model.Client
	// Dial connects to executors. Required.
	Dial Dialer
	// Placer places sessions on one executor of a pool; nil treats every
	// executor address as one executor.
	Placer Placer
	// DefaultExecutor is the address used by sessions that name none
	// ("embedded" for an in-process executor).
	DefaultExecutor string
	// Store persists transcripts; nil keeps them in memory only.
	Store *Store
	// Defaults fill the zero fields of every new session's configuration.
	Defaults SessionConfig
	// Permissions, when set, answers permission requests before any client
	// sees them.
	Permissions PermissionFunc
	// AbortGrace is how long an interrupted turn waits for the executor's
	// results of aborted calls before it writes interrupted results itself.
	AbortGrace time.Duration
	// ResumeWindow is how long a turn whose executor stream broke keeps
	// trying to resume the executor's session before its unfinished calls
	// get interrupted results. The executor's own retention (in its Hello)
	// caps it. A session with a single executor (not a pool) that still
	// cannot reach it afterwards keeps trying for another ResumeWindow
	// before the turn fails, and opens a new executor session if the old
	// one is gone.
	ResumeWindow time.Duration
	// EventBacklog is how many events per session are kept for clients
	// that attach late or fall behind.
	EventBacklog int
	// ClientName and ClientVersion are sent to executors.
	ClientName, ClientVersion string
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
}

// SessionConfig is what can be chosen per session. Zero fields take the
// orchestrator's defaults.
type SessionConfig struct {
	// Executor is the executor address ("embedded" for in-process). For a
	// session placed from a pool it is the member chosen at creation.
	Executor string
	// Pool is the pool address the session was placed from, if any.
	Pool string
	// Model is the model name.
	Model string
	// SystemPrompt replaces the default system prompt.
	SystemPrompt string
	// AppendSystemPrompt is added at the end of the system prompt, the
	// default one or SystemPrompt (orchestrator -p puts CLAUDE.md files
	// and --append-system-prompt here).
	AppendSystemPrompt string
	// MaxTokens caps each response.
	MaxTokens int
	// MaxTurns caps model requests per user message.
	MaxTurns int
	// AllowedTools, when set, are the only tools offered (bare names).
	AllowedTools []string
	// DisallowedTools are never offered (bare names).
	DisallowedTools []string
	// Settings are the permission rules, mode and hooks for the executor.
	Settings *executorv1.Settings
	// Workspace is the working directory on the executor.
	Workspace string
	// ThinkingBudget turns on extended thinking with this many tokens.
	ThinkingBudget int
	// Options are the executor's scheduling options.
	Options *executorv1.SessionOptions
	// Directory is the directory of the client that created the session,
	// on the client's machine (orchestrator -p's current directory), so
	// that a client can find the latest conversation held in a directory
	// (Store.Latest). The orchestrator does not use it otherwise.
	Directory string
}

// withDefaults returns c with zero fields taken from d.
func (c SessionConfig) withDefaults(d SessionConfig) SessionConfig {
	if c.Executor == "" {
		c.Executor = d.Executor
	}
	if c.Model == "" {
		c.Model = d.Model
	}
	if c.SystemPrompt == "" {
		c.SystemPrompt = d.SystemPrompt
	}
	if c.AppendSystemPrompt == "" {
		c.AppendSystemPrompt = d.AppendSystemPrompt
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = d.MaxTokens
	}
	if c.MaxTurns == 0 {
		c.MaxTurns = d.MaxTurns
	}
	if len(c.AllowedTools) == 0 {
		c.AllowedTools = d.AllowedTools
	}
	if len(c.DisallowedTools) == 0 {
		c.DisallowedTools = d.DisallowedTools
	}
	if c.Settings == nil {
		c.Settings = d.Settings
	}
	if c.Workspace == "" {
		c.Workspace = d.Workspace
	}
	if c.ThinkingBudget == 0 {
		c.ThinkingBudget = d.ThinkingBudget
	}
	if c.Options == nil {
		c.Options = d.Options
	}
	return c
}

func (c SessionConfig) validate() error {
	switch {
	case c.MaxTokens < 0:
		return fmt.Errorf("%w: max_tokens %d", ErrInvalid, c.MaxTokens)
	case c.MaxTurns < 0:
		return fmt.Errorf("%w: max_turns %d", ErrInvalid, c.MaxTurns)
	case c.ThinkingBudget < 0:
		return fmt.Errorf("%w: thinking budget %d", ErrInvalid, c.ThinkingBudget)
	case c.ThinkingBudget > 0 && c.MaxTokens > 0 && c.ThinkingBudget >= c.MaxTokens:
		return fmt.Errorf("%w: thinking budget %d must be below max_tokens %d", ErrInvalid, c.ThinkingBudget, c.MaxTokens)
	}
	return nil
}

// storedConfig is SessionConfig as persisted in a transcript.
type storedConfig struct {
	Executor        string          `json:"executor,omitempty"`
	Pool            string          `json:"pool,omitempty"`
	Model           string          `json:"model,omitempty"`
	SystemPrompt    string          `json:"system_prompt,omitempty"`
	AppendSystem    string          `json:"append_system_prompt,omitempty"`
	MaxTokens       int             `json:"max_tokens,omitempty"`
	MaxTurns        int             `json:"max_turns,omitempty"`
	AllowedTools    []string        `json:"allowed_tools,omitempty"`
	DisallowedTools []string        `json:"disallowed_tools,omitempty"`
	Settings        json.RawMessage `json:"settings,omitempty"`
	Workspace       string          `json:"workspace,omitempty"`
	ThinkingBudget  int             `json:"thinking_budget,omitempty"`
	Options         json.RawMessage `json:"options,omitempty"`
	Directory       string          `json:"directory,omitempty"`
}

// MarshalJSON stores the configuration, proto fields in protojson form.
func (c SessionConfig) MarshalJSON() ([]byte, error) {
	s := storedConfig{
		Executor: c.Executor, Pool: c.Pool, Model: c.Model, SystemPrompt: c.SystemPrompt, AppendSystem: c.AppendSystemPrompt,
		MaxTokens: c.MaxTokens, MaxTurns: c.MaxTurns, AllowedTools: c.AllowedTools, DisallowedTools: c.DisallowedTools,
		Workspace: c.Workspace, ThinkingBudget: c.ThinkingBudget, Directory: c.Directory,
	}
	var err error
	if c.Settings != nil {
		if s.Settings, err = protojson.Marshal(c.Settings); err != nil {
			return nil, fmt.Errorf("encode settings: %w", err)
		}
	}
	if c.Options != nil {
		if s.Options, err = protojson.Marshal(c.Options); err != nil {
			return nil, fmt.Errorf("encode options: %w", err)
		}
	}
	return json.Marshal(s)
}

// UnmarshalJSON reads a stored configuration.
func (c *SessionConfig) UnmarshalJSON(data []byte) error {
	var s storedConfig
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*c = SessionConfig{
		Executor: s.Executor, Pool: s.Pool, Model: s.Model, SystemPrompt: s.SystemPrompt, AppendSystemPrompt: s.AppendSystem,
		MaxTokens: s.MaxTokens, MaxTurns: s.MaxTurns, AllowedTools: s.AllowedTools, DisallowedTools: s.DisallowedTools,
		Workspace: s.Workspace, ThinkingBudget: s.ThinkingBudget, Directory: s.Directory,
	}
	if len(s.Settings) > 0 {
		c.Settings = &executorv1.Settings{}
		if err := protojson.Unmarshal(s.Settings, c.Settings); err != nil {
			return fmt.Errorf("decode settings: %w", err)
		}
	}
	if len(s.Options) > 0 {
		c.Options = &executorv1.SessionOptions{}
		if err := protojson.Unmarshal(s.Options, c.Options); err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
	}
	return nil
}

// StopReason says why a turn ended.
type StopReason string

// Why turns end.
const (
	StopEndTurn      StopReason = "end_turn"
	StopMaxTurns     StopReason = "max_turns"
	StopInterrupted  StopReason = "interrupted"
	StopError        StopReason = "error"
	StopStopSequence StopReason = "stop_sequence"
	StopRefusal      StopReason = "refusal"
)

// TurnResult sums up a finished turn.
type TurnResult struct {
	// StopReason says why the turn ended.
	StopReason StopReason
	// Usage counts the turn's tokens.
	Usage model.Usage
	// Requests is the number of model requests made.
	Requests int
	// Text is the final assistant text.
	Text string
	// Duration is the turn's wall time.
	Duration time.Duration
	// APIDuration is the part of it spent in model requests, from sending
	// each to the end of its response stream.
	APIDuration time.Duration
	// Err is the error that ended the turn, for StopError and StopMaxTurns.
	Err error
}

// Info describes a session.
type Info struct {
	// ID of the session.
	ID string
	// Executor address, or "embedded".
	Executor string
	// Model name.
	Model string
	// CreatedAt is when the session was created.
	CreatedAt time.Time
	// Turns counts completed turns.
	Turns int
	// Usage counts tokens so far.
	Usage model.Usage
	// MessageCount is the transcript's length.
	MessageCount int
	// Busy is true while a turn runs.
	Busy bool
}
