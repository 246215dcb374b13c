package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// Error classes of the orchestrator; the gRPC edge maps them to status codes.
var (
	// ErrNotFound: no session has that id (the Store's error class too).
	ErrNotFound = transcript.ErrNotFound
	// ErrExists: a session with that id exists already (the Store's error
	// class too).
	ErrExists = transcript.ErrExists
	// ErrBusy: the session is running a turn.
	ErrBusy = errors.New("session is busy with a turn")
	// ErrInvalid: a request or configuration is malformed.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the orchestrator or session is shut down.
	ErrClosed = errors.New("closed")
	// ErrExecutorUnavailable: the session's executor could not be reached
	// or refused the session. The error wraps the executor's, with its
	// execapi class (ErrDraining, ...) and, for a refusal, its status.
	ErrExecutorUnavailable = errors.New("executor unavailable")
	// ErrSandboxRequirement: the executor's Hello does not show a
	// protection the orchestrator or the session requires. The error wraps
	// the *handshake.MissingError that names what is missing.
	ErrSandboxRequirement = errors.New("the executor's sandbox does not meet the requirements")
)

// Executor is what the orchestrator needs of its executors: the tools of
// one, and a link to a session on one (execapi.Link: submit, abort,
// decide, events, resume). cmd/orchestrator gives it an execgrpc.Client,
// for remote executors and the in-process one alike.
type Executor interface {
	// ListTools returns the tools of the executor at addr.
	ListTools(ctx context.Context, addr string) ([]execapi.ToolInfo, error)
	// Open opens session req.SessionID on the executor at addr, or takes
	// it over when the executor has it from before a restart (its calls
	// are then aborted); events gets its events.
	Open(ctx context.Context, addr string, req execapi.OpenRequest, events execapi.EventFunc) (execapi.Link, error)
	// Attach resumes session req.SessionID on the executor at addr after
	// its event numbered after, keeping its calls running and replaying
	// its later events to events, or opens it anew when the executor no
	// longer has it (Hello.Resumed tells which). A replica taking a
	// session over from another uses it.
	Attach(ctx context.Context, addr string, req execapi.OpenRequest, after uint64, events execapi.EventFunc) (execapi.Link, error)
}

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
	// Draining tells the placer that addr, a member of pool target,
	// refused a session because it is draining, so that it gets no new
	// session before its health says it serves again (which may take the
	// placer a while to learn by itself).
	Draining(target, addr string)
}

// PermissionFunc answers a permission request without a client, e.g. in
// headless mode. Returning nil leaves the request to the attached client.
type PermissionFunc func(sessionID string, req execapi.PermissionRequest) *execapi.PermissionDecision

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
	// Executor reaches the executors. Required.
	Executor Executor
	// Placer places sessions on one executor of a pool; nil treats every
	// executor address as one executor.
	Placer Placer
	// DefaultExecutor is the address used by sessions that name none
	// ("embedded" for an in-process executor).
	DefaultExecutor string
	// Store persists conversations (FileStore, or a shared store such as
	// pkg/orchestrator/pgstore for replicas); nil keeps them in memory only.
	Store Store
	// Replica names this process among the replicas of a shared Store: the
	// holder of the leases of the turns it runs. Empty picks a random one.
	Replica string
	// LeaseTTL is how long a turn's lease lasts unless renewed (a third of
	// it apart), so how long a turn whose replica died waits before another
	// takes it over. Used with a shared Store only.
	LeaseTTL time.Duration
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
	// WebFetchModel is the small, fast model that answers a WebFetch
	// call's prompt from the page the executor fetched; empty means
	// model.DefaultSmallModel.
	WebFetchModel string
	// WebSearch, when set, offers the Messages API's server-side web
	// search tool to the model in every request; its blocks are kept in
	// the transcript as the API sent them.
	WebSearch *model.WebSearch
	// MCPServers are the operator's MCP servers (orchestrator serve
	// --mcp-config), ${VAR} expanded: every session gets them, besides its
	// own, and cannot replace one with a server of the same name.
	MCPServers mcpclient.Servers
	// StrictMCP refuses sessions that bring MCP servers of their own: the
	// operator's are the only ones.
	StrictMCP bool
	// RequireSandbox are protections every session's executor must
	// enforce, on top of each session's own RequireSandbox.
	RequireSandbox handshake.Requirements
	// ClientName and ClientVersion are sent to executors.
	ClientName, ClientVersion string
	// Agents are the user-defined subagent types (from .claude/agents),
	// offered with the built-in ones through the Agent tool.
	Agents []agents.Definition
	// SubagentsOnPool runs each subagent of a session placed from a pool
	// on an executor session of its own, placed on the pool like a new
	// session (preferring a member no sibling subagent runs on), so that
	// independent subagents run on separate executors in parallel. They
	// then work in that executor's workspace, not the conversation's.
	// Off, or for a session on a single executor, subagents share the
	// conversation's executor session.
	SubagentsOnPool bool
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
}

// SessionConfig is what can be chosen per session: the executor, model,
// prompts, tools, settings, workspace and options (see the fields of
// transcript.Config, which is the same type, so that transcripts keep it as
// it is). Zero fields take the orchestrator's defaults.
type SessionConfig = transcript.Config

// withDefaults returns c with zero fields taken from d.
func withDefaults(c, d SessionConfig) SessionConfig {
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

func validate(c SessionConfig) error {
	if _, err := handshake.Parse(strings.Join(c.RequireSandbox, ",")); err != nil {
		return fmt.Errorf("%w: require_sandbox: %w", ErrInvalid, err)
	}
	for _, name := range c.MCPServers.Names() {
		if name == "" {
			return fmt.Errorf("%w: an MCP server without a name", ErrInvalid)
		}
	}
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
	// Sandbox is what the executor said of its sandbox in its Hello: what
	// confines the tools. Nil until the session connected.
	Sandbox *execapi.SandboxInfo
	// MCPServers are the session's MCP servers with their state, as the
	// executor last reported them.
	MCPServers []mcpclient.ServerStatus
}
