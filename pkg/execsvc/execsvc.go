// Package execsvc assembles a complete executor the way toolsvc runs it: the
// built-in tools, one workspace, scratch directory and sandbox runner per
// session, and the limits. cmd/toolsvc, the orchestrator's embedded executor
// and the tests all build their executor here, so they behave alike.
//
// Why one package of this size (about 950 lines): assembling an executor
// means turning every operator setting into the per-session pieces (runner,
// workspace, limits, MCP servers) in one place, so that toolsvc, the
// embedded executor and the tests cannot drift apart.
package execsvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/pkg/dirquota"
	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/tools/file"
	"github.com/toolwire/toolwire/pkg/tools/search"
	"github.com/toolwire/toolwire/pkg/tools/shell"
	"github.com/toolwire/toolwire/pkg/tools/web"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Config is everything an operator sets for an executor.
type Config struct {
	// Root is the directory sessions work in (absolute). A session's
	// workspace is the root, or a directory under it.
	Root string
	// SessionDirs gives each session that names no workspace a fresh
	// directory under Root instead of Root itself.
	SessionDirs bool
	// Profile is ProfileService (the default) or ProfileDevelopment.
	Profile string
	// ReadOnly and ReadWrite are extra roots every session's file tools
	// may use (processes: Sandbox.ReadOnlyPaths and ReadWritePaths).
	ReadOnly, ReadWrite []string
	// AddDirs are extra directories every session may read and write, with
	// the file tools and from processes alike (claude --add-dir). Each must
	// be an absolute path to a directory.
	AddDirs []string
	// Deny are the deny patterns (see workspace.Config.Deny): file tools
	// refuse them, and processes are kept out of the places they name (see
	// workspace.DenyLocations); nil means workspace.DefaultDeny.
	Deny []string
	// Home is the user's home directory: "~" in deny patterns and
	// settings, and HOME of processes in the development profile. Empty
	// means the service's $HOME.
	Home string
	// SandboxSettings are the sandbox lists of a settings file, paths as
	// written (relative ones resolve against Root): AllowWrite and
	// AllowRead widen what processes may use, DenyRead joins the deny
	// list, AllowRead takes entries out of it, and DenyWrite must hold.
	// Its network lists join Egress.
	SandboxSettings settings.Sandbox
	// Egress is the operator's egress policy, for Sandbox.Network
	// "allowlist": the most any session may reach through its egress
	// proxy. The allowed and denied domains of SandboxSettings.Network
	// are added to it; a session's own settings may narrow it further.
	Egress egress.Policy
	// Durable makes file writes fsync before they are renamed into place.
	Durable bool
	// TempRoot holds the per-session scratch directories; empty means the
	// system temp directory.
	TempRoot string
	// OutputRoot, when set, keeps each session's saved outputs (the whole
	// output of a shortened Bash result, background shells' output files)
	// in <OutputRoot>/<session id>/ beyond the session's end, so that the
	// paths a conversation's transcript holds still lead somewhere, and a
	// session opened later under the same id finds them. Tool processes
	// may read them, not change them. Empty keeps them in the session's
	// scratch directory, removed with the session.
	OutputRoot string
	// TempQuota, when above 0, gives each session's temp directory a file
	// system of that many bytes of its own (a tmpfs, charged to the
	// session's memory bound), so that a session cannot fill the disk
	// through it: writes past it fail with ENOSPC, and the result of a
	// command that failed with it full says so. It needs root; without,
	// it is left out (and logged).
	TempQuota int64
	// OutputQuota, when above 0, bounds the bytes of the outputs saved for
	// each session over its life (whole outputs of shortened results,
	// background commands' output files): past it a whole output is not
	// saved, and a background command's output stops and the command is
	// killed, each saying so.
	OutputQuota int64
	// WorkspaceQuota, when above 0, gives each workspace the executor
	// makes (SessionDirs, or a new directory a client names under Root) a
	// disk quota of that many bytes, where Root's file system can enforce
	// one (btrfs with quotas enabled, see pkg/dirquota): writes past it
	// fail with EDQUOT, and the result of a command that failed with the
	// workspace full says so. Processes of such a session cannot make
	// btrfs subvolumes, which the quota would not cover. Where Root
	// cannot have quotas, the workspaces get none (and it is logged),
	// unless RequireWorkspaceQuota makes New fail instead. A workspace
	// that exists already gets no quota (it is the client's own) unless
	// the executor made it so for an earlier session: it then gets
	// WorkspaceQuota as it is now.
	WorkspaceQuota int64
	// RequireWorkspaceQuota makes New fail when WorkspaceQuota cannot be
	// enforced on Root.
	RequireWorkspaceQuota bool
	// OutputRetention is how long the outputs of a session that ended are
	// kept in OutputRoot (checked as sessions open). Zero keeps them until
	// whoever owns OutputRoot removes them: orchestrator -p points it at
	// its sessions directory and removes a conversation's outputs with the
	// conversation.
	OutputRetention time.Duration
	// Sandbox configures process confinement. Its Session bounds are what
	// each session may use at most; New lowers them to what all sessions
	// together may use (see sandbox.PlanSessions).
	Sandbox sandbox.Config
	// MaxSessions is the most sessions the executor holds at once; 0 means
	// no limit. With session bounds it sizes the service's reserve: all
	// sessions together get what toolsvc's own cgroup allows less what
	// toolsvc keeps for itself.
	MaxSessions int
	// MaxSessionsPerClient bounds the sessions of one client identity (a
	// client certificate's subject, or the peer's address); 0 means no
	// bound.
	MaxSessionsPerClient int
	// SessionUIDs, when not zero, gives each session a user of its own
	// from this range (see sandbox.Config.SessionUser), so that sessions
	// cannot see, signal or trace each other's processes or read each
	// other's files; Sandbox.RunAsUser must then be empty. A workspace
	// made for a session belongs to its user. It needs root.
	SessionUIDs sandbox.UIDRange
	// Limits cap calls.
	Limits tool.Limits
	// Operator holds executor-wide permission rules, mode and hooks that
	// sessions cannot loosen.
	Operator settings.Settings
	// MaxConcurrency caps parallel calls per session.
	MaxConcurrency int
	// Retention keeps disconnected sessions this long.
	Retention time.Duration
	// TraceContent records tool inputs and results on the calls' spans.
	TraceContent bool
	// PermissionTimeout bounds waits for permission decisions.
	PermissionTimeout time.Duration
	// Version is reported to clients.
	Version string
	// Logger receives logs; nil discards.
	Logger *slog.Logger
	// MCP configures the MCP servers of sessions: the operator's, which
	// every session gets, their start timeout and output cap.
	MCP executor.MCPConfig
	// Explain, when set, rewrites the errors of New and of a session's
	// setup (a workspace the tool user cannot use, no session user left)
	// before anyone sees them, so that they can name what fixes them in the
	// caller's terms: a command passes Hints.Explain, naming its flags.
	// Nil leaves them as they are.
	Explain func(error) error
}

// Settings of an executor that errors are about, besides the sandbox's
// (see sandbox.Setting).
const (
	// SettingRoot is Config.Root.
	SettingRoot sandbox.Setting = "root"
	// SettingExtraRoots is Config.ReadOnly and Config.ReadWrite.
	SettingExtraRoots sandbox.Setting = "extra roots"
	// SettingWorkspaceQuota is Config.WorkspaceQuota.
	SettingWorkspaceQuota sandbox.Setting = "workspace quota"
)

// Hints say, for each setting, what fixes an error about it in the terms
// of whoever configured the executor, e.g. "pass --network host".
type Hints map[sandbox.Setting]string

// Explain returns err followed by the hints of the settings it is about
// (sandbox.SettingsOf); err itself when there are none. The result wraps
// err.
func (h Hints) Explain(err error) error {
	if err == nil {
		return nil
	}
	var fixes []string
	for _, s := range sandbox.SettingsOf(err) {
		if fix := h[s]; fix != "" && !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	if len(fixes) == 0 {
		return err
	}
	return &explained{err: err, fixes: strings.Join(fixes, "; and ")}
}

// explained is an error followed by what fixes it.
type explained struct {
	err   error
	fixes string
}

func (e *explained) Error() string { return e.err.Error() + "; to fix it, " + e.fixes }

func (e *explained) Unwrap() error { return e.err }

// Tools returns the built-in tools, hidden aliases included.
func Tools() []tool.Tool {
	var all []tool.Tool
	all = append(all, file.Tools()...)
	all = append(all, search.Tools()...)
	all = append(all, shell.Tools()...)
	all = append(all, web.Tools()...)
	return all
}

// New checks that the kernel supports the configured sandbox (failing
// closed if not) and returns the executor.
func New(cfg Config) (*executor.Executor, error) {
	explain := cfg.explain
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, explain(&sandbox.SettingError{Setting: SettingRoot, Err: fmt.Errorf("root %q: %w", cfg.Root, err)})
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, explain(&sandbox.SettingError{Setting: SettingRoot, Err: fmt.Errorf("root: %w", err)})
	} else if !fi.IsDir() {
		return nil, explain(&sandbox.SettingError{Setting: SettingRoot, Err: fmt.Errorf("root %s is not a directory", root)})
	}
	cfg.Root = root
	for _, dir := range append(append([]string(nil), cfg.ReadOnly...), cfg.ReadWrite...) {
		if fi, err := os.Stat(dir); err != nil {
			return nil, explain(&sandbox.SettingError{Setting: SettingExtraRoots, Err: fmt.Errorf("extra root: %w", err)})
		} else if !fi.IsDir() {
			return nil, explain(&sandbox.SettingError{Setting: SettingExtraRoots, Err: fmt.Errorf("extra root %s is not a directory", dir)})
		}
	}
	res, err := resolve(cfg)
	if err != nil {
		return nil, explain(err)
	}
	if err := sandbox.Check(res.sandbox); err != nil {
		return nil, explain(err)
	}
	if b := res.sandbox.Session; b != (sandbox.SessionBounds{}) {
		plan, err := sandbox.PlanSessions(cfg.MaxSessions, b)
		if err != nil {
			return nil, explain(err)
		}
		res.sandbox.Session = plan.PerSession
		sandbox.UseSessionTotal(plan.Total)
		if cfg.Logger != nil {
			cfg.Logger.Info("session bounds",
				"processes_per_session", plan.PerSession.Processes, "memory_per_session", sandbox.FormatBytes(plan.PerSession.Memory),
				"processes_all_sessions", plan.Total.Processes, "memory_all_sessions", sandbox.FormatBytes(plan.Total.Memory),
				"tasks_allowed", plan.Capacity.Tasks, "tasks_from", plan.Capacity.TasksFrom,
				"memory_allowed", sandbox.FormatBytes(plan.Capacity.Memory), "memory_from", plan.Capacity.MemoryFrom)
		}
	}
	var users *sandbox.UIDPool
	if !cfg.SessionUIDs.IsZero() {
		if cfg.Sandbox.RunAsUser != "" {
			return nil, explain(&sandbox.SettingError{Setting: sandbox.SettingSessionUsers,
				Err: fmt.Errorf("a user of its own for each session (ids %s) and one user for all (%q) exclude each other: choose one", cfg.SessionUIDs, cfg.Sandbox.RunAsUser)})
		}
		if err := sandbox.CheckSessionUsers(root); err != nil {
			return nil, explain(err)
		}
		if users, err = sandbox.SharedUIDPoolFor(cfg.SessionUIDs, uidsNeeded(cfg.MaxSessions)); err != nil {
			return nil, explain(err)
		}
	}
	if cfg.TempQuota > 0 && os.Geteuid() != 0 {
		if cfg.Logger != nil {
			cfg.Logger.Info("session temp directories get no quota of their own: mounting one needs root", "quota", sandbox.FormatBytes(cfg.TempQuota))
		}
		cfg.TempQuota = 0
	}
	var quotas *dirquota.FS
	if cfg.WorkspaceQuota > 0 {
		if quotas, err = workspaceQuotas(cfg, root); err != nil {
			return nil, explain(err)
		}
	}
	var outputs *outputStore
	if cfg.OutputRoot != "" {
		if outputs, err = newOutputStore(cfg.OutputRoot, cfg.OutputRetention, cfg.Logger); err != nil {
			return nil, err
		}
	}
	return executor.New(executor.Config{
		Tools:                Tools(),
		NewEnv:               envFactory(cfg, res, users, outputs, quotas),
		Limits:               cfg.Limits,
		MaxConcurrency:       cfg.MaxConcurrency,
		Retention:            cfg.Retention,
		TraceContent:         cfg.TraceContent,
		PermissionTimeout:    cfg.PermissionTimeout,
		Operator:             cfg.Operator,
		Version:              cfg.Version,
		Logger:               cfg.Logger,
		MCP:                  cfg.MCP,
		MaxSessions:          cfg.MaxSessions,
		MaxSessionsPerClient: cfg.MaxSessionsPerClient,
	})
}

// workspaceQuotas returns the file system of root on which the executor
// gives the workspaces it makes their quota. Where root's file system
// cannot have quotas it returns nil, or, with RequireWorkspaceQuota, an
// error that says why.
func workspaceQuotas(cfg Config, root string) (*dirquota.FS, error) {
	quotas, err := dirquota.Probe(root)
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("setting a quota needs root")
	}
	if err == nil {
		return quotas, nil
	}
	if cfg.RequireWorkspaceQuota {
		return nil, &sandbox.SettingError{Setting: SettingWorkspaceQuota,
			Err: fmt.Errorf("a workspace quota of %s cannot be enforced under %s: %w", sandbox.FormatBytes(cfg.WorkspaceQuota), root, err)}
	}
	if cfg.Logger != nil {
		cfg.Logger.Info("the workspaces toolsvc makes get no disk quota", "quota", sandbox.FormatBytes(cfg.WorkspaceQuota), "reason", err.Error())
	}
	return nil, nil
}

// uidsNeeded is how many session ids an executor of up to maxSessions
// sessions needs: one per session, one per running call where calls are
// marked with a group of their own (no cgroup), and spares for ids that
// processes left over still hold.
func uidsNeeded(maxSessions int) int {
	if maxSessions <= 0 {
		return 0 // no bound: one block
	}
	return 2*maxSessions + 64
}

// MaxSessionsFor returns the most sessions a session id range r can serve
// (the inverse of the ids each session and its calls need); at least 1.
func MaxSessionsFor(r sandbox.UIDRange) int {
	return max(1, (r.Last-r.First+1-64)/2)
}

// explain applies cfg.Explain to err.
func (cfg Config) explain(err error) error {
	if cfg.Explain == nil {
		return err
	}
	return cfg.Explain(err)
}

// envFactory returns the executor's EnvFactory for cfg as res resolved
// it; users, when not nil, gives each session its user, and outputs, when
// not nil, keeps the sessions' saved outputs.
func envFactory(cfg Config, res resolved, users *sandbox.UIDPool, outputs *outputStore, quotas *dirquota.FS) executor.EnvFactory {
	return func(ctx context.Context, req executor.EnvRequest) (_ *tool.Env, _ executor.SandboxInfo, err error) {
		sessionID, dir := req.SessionID, req.Workspace
		var info executor.SandboxInfo
		var cleanup []func()
		defer func() {
			if err != nil {
				for i := len(cleanup) - 1; i >= 0; i-- {
					cleanup[i]()
				}
				err = cfg.explain(err)
			}
		}()
		sc := res.sandbox
		var policy egress.Policy
		if sc.Network == sandbox.NetworkAllowlist {
			if policy, err = sessionPolicy(res.egress, req.Network); err != nil {
				return nil, info, err
			}
		}
		webPolicy, err := webPolicy(sc.Network, policy, res.egress, req.Network)
		if err != nil {
			return nil, info, err
		}
		owner := -1
		if users != nil {
			if sc.SessionUser, err = users.Lease(); err != nil {
				return nil, info, err
			}
			// NewRunner takes the lease over; until then it is ours.
			lease := sc.SessionUser
			cleanup = append(cleanup, lease.Release)
			owner = lease.ID()
		}
		wsDir, quota, err := sessionDir(cfg, quotas, sessionID, dir, owner)
		if err != nil {
			return nil, info, err
		}
		sc.NoSubvolumes = quota
		tempRoot := cfg.TempRoot
		if cfg.TempQuota > 0 {
			// Where a session's mount namespace can drop the others'.
			if tempRoot, err = sandbox.SessionTempRoot(cmp.Or(cfg.TempRoot, os.TempDir())); err != nil {
				return nil, info, err
			}
		}
		tmp, err := os.MkdirTemp(tempRoot, "toolwire-"+safeName(sessionID)+"-")
		if err != nil {
			return nil, info, fmt.Errorf("session scratch directory: %w", err)
		}
		cleanup = append(cleanup, func() { _ = os.RemoveAll(tmp) })
		if cfg.TempQuota > 0 {
			if err := sandbox.MountSessionTemp(tmp, cfg.TempQuota); err != nil {
				return nil, info, err
			}
			cleanup = append(cleanup, func() { sandbox.UnmountSessionTemp(tmp) })
		}
		outDir := filepath.Join(tmp, "outputs")
		readOnly := res.fileRO
		releaseOutputs := func() {}
		if outputs != nil {
			// Outside the temp dir, which processes may write: there they
			// may only read.
			if outDir, releaseOutputs, err = outputs.acquire(sessionID); err != nil {
				return nil, info, err
			}
			cleanup = append(cleanup, releaseOutputs)
			readOnly = append(slices.Clip(readOnly), outDir)
			sc.SessionReadOnlyPaths = append(slices.Clip(sc.SessionReadOnlyPaths), outDir)
		} else if err := os.Mkdir(outDir, 0o700); err != nil {
			return nil, info, fmt.Errorf("session output directory: %w", err)
		}
		if err := checkDenyWrite(res.denyWrite, slices.Concat([]string{wsDir, tmp}, sc.ReadWritePaths)); err != nil {
			return nil, info, err
		}
		ws, err := workspace.New(workspace.Config{
			Dir:       wsDir,
			ReadWrite: slices.Concat([]string{tmp}, res.fileRW),
			ReadOnly:  readOnly,
			Deny:      res.deny,
			Home:      res.home,
			Durable:   cfg.Durable,
			Logger:    cfg.Logger,
		})
		if err != nil {
			return nil, info, err
		}
		cleanup = append(cleanup, func() { _ = ws.Close() })
		runner, err := sandbox.NewRunner(sc, wsDir, tmp)
		if err != nil {
			return nil, info, err
		}
		if outputs != nil {
			if err := shareWith(outDir, runner.UID(), runner.GID()); err != nil {
				runner.Close()
				return nil, info, err
			}
		}
		var proxy *egress.Proxy
		if ln := runner.EgressListener(); ln != nil {
			proxy = serveEgress(ln, policy, cfg.Logger, sessionID)
		}
		env := &tool.Env{
			SessionID:   sessionID,
			Files:       ws,
			AddDirs:     cfg.AddDirs,
			Procs:       runner,
			Egress:      proxy,
			Web:         webPolicy,
			TempDir:     tmp,
			OutputDir:   outDir,
			TempQuota:   cfg.TempQuota,
			OutputQuota: tool.NewByteQuota("saved-output quota", cfg.OutputQuota),
			Workspace:   workspaceUsage(quotas, quota, wsDir),
			Limits:      cfg.Limits.WithDefaults(),
			Reads:       tool.NewFileState(),
		}
		// Registered first, so it runs last: after tools' own cleanup.
		env.OnClose(func() {
			if proxy != nil {
				proxy.Close()
			}
			runner.Close()
			_ = ws.Close()
			if cfg.TempQuota > 0 {
				sandbox.UnmountSessionTemp(tmp)
			}
			_ = os.RemoveAll(tmp)
			releaseOutputs()
		})
		info = executor.SandboxInfo{
			Backend:  cfg.Sandbox.Backend,
			Enforced: append([]string{"file_roots"}, runner.Enforced()...),
			Network:  runner.Network(),
			RunAs:    cfg.Sandbox.RunAsUser,
		}
		if quota {
			info.Enforced = append(info.Enforced, "workspace_quota")
		}
		if proxy != nil {
			info.AllowedDomains = policy.AllowedEntries()
		}
		if users != nil {
			info.RunAs = fmt.Sprintf("%s (uid %d, this session's own)", runner.User(), runner.UID())
		}
		return env, info, nil
	}
}

// sessionDir resolves a session's workspace: empty means the root (or a new
// directory under it with SessionDirs), relative means under the root, and
// absolute must lie under the root. A workspace it creates belongs to owner
// when that is 0 or more (the session's user), and has a quota of its own
// with quotas (not nil); quota reports whether the workspace has one,
// including one made so before.
func sessionDir(cfg Config, quotas *dirquota.FS, sessionID, dir string, owner int) (_ string, quota bool, _ error) {
	switch {
	case dir == "" && !cfg.SessionDirs:
		return cfg.Root, false, nil
	case dir == "":
		dir = filepath.Join(cfg.Root, "sessions", safeName(sessionID))
	case !filepath.IsAbs(dir):
		dir = filepath.Join(cfg.Root, dir)
	}
	dir = filepath.Clean(dir)
	if dir != cfg.Root && !strings.HasPrefix(dir, cfg.Root+string(filepath.Separator)) {
		return "", false, fmt.Errorf("%w: workspace %s is outside the executor's root %s", executor.ErrInvalidWorkspace, dir, cfg.Root)
	}
	makeLeaf := func(path string, mode os.FileMode) error { return os.Mkdir(path, mode) }
	if quotas != nil {
		makeLeaf = func(path string, mode os.FileMode) error {
			switch err := quotas.Make(path, cfg.WorkspaceQuota); {
			case errors.Is(err, dirquota.ErrUnsupported):
				// Below a mount of another file system: no quota, which
				// the session's Hello then does not claim.
				return os.Mkdir(path, mode)
			case err != nil:
				return err
			}
			quota = true
			return os.Chmod(path, mode)
		}
	}
	created, err := mkdirOwned(cfg.Root, dir, owner, makeLeaf)
	if err != nil {
		return "", false, fmt.Errorf("%w: workspace %s: %w", executor.ErrInvalidWorkspace, dir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false, fmt.Errorf("%w: workspace %s: %w", executor.ErrInvalidWorkspace, dir, err)
	}
	rootReal, err := filepath.EvalSymlinks(cfg.Root)
	if err != nil {
		return "", false, fmt.Errorf("root %s: %w", cfg.Root, err)
	}
	if real != rootReal && !strings.HasPrefix(real, rootReal+string(filepath.Separator)) {
		return "", false, fmt.Errorf("%w: workspace %s resolves to %s, outside the executor's root", executor.ErrInvalidWorkspace, dir, real)
	}
	if quotas != nil && !created && dir != cfg.Root {
		// Made with a quota by an earlier session under this id: the
		// quota follows the executor's setting.
		if quota, err = quotas.SetLimit(real, cfg.WorkspaceQuota); err != nil {
			return "", false, fmt.Errorf("workspace %s: %w", dir, err)
		}
	}
	return dir, quota, nil
}

// workspaceUsage returns the tool.Env's report of what a workspace with a
// quota takes; nil without one.
func workspaceUsage(quotas *dirquota.FS, quota bool, dir string) func() (used, limit int64, ok bool) {
	if !quota {
		return nil
	}
	return func() (int64, int64, bool) {
		used, limit, ok, err := quotas.Usage(dir)
		return used, limit, ok && err == nil
	}
}

// mkdirOwned creates dir and its missing parents below root, giving them
// root's owner: a service running as root must not create workspaces its
// unprivileged tool user cannot use. With a session user (leaf 0 or more)
// a dir it creates is the session user's alone (mode 0700), while the
// parents stay root's owner's and searchable. makeLeaf makes dir itself;
// created reports whether it did.
func mkdirOwned(root, dir string, leaf int, makeLeaf func(string, os.FileMode) error) (created bool, _ error) {
	fi, err := os.Stat(root)
	if err != nil {
		return false, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return false, err
	}
	parts := strings.Split(rel, string(filepath.Separator))
	cur := root
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		isLeaf := i == len(parts)-1
		last := isLeaf && leaf >= 0
		mode := os.FileMode(0o755)
		if last {
			mode = 0o700
		}
		mkdir := os.Mkdir
		if isLeaf {
			mkdir = makeLeaf
		}
		switch err := mkdir(cur, mode); {
		case errors.Is(err, fs.ErrExist):
			continue
		case err != nil:
			return false, err
		}
		created = isLeaf
		if os.Geteuid() != 0 {
			continue
		}
		uid, gid := -1, -1
		if st != nil {
			uid, gid = int(st.Uid), int(st.Gid)
		}
		if last {
			uid, gid = leaf, leaf
		}
		if uid >= 0 {
			if err := os.Chown(cur, uid, gid); err != nil {
				return created, err
			}
		}
	}
	return created, nil
}

// safeName keeps the characters of s that are safe in a file name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
