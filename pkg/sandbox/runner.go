package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Runner starts confined processes for one session. It is safe for
// concurrent use.
type Runner struct {
	cfg       Config
	workspace string
	tempDir   string
	id        identity
	log       *slog.Logger
	sp        *spawner
	cg        *runnerCgroups // nil when no hierarchy is usable
	devNull   *os.File
	rlimits   []rlimit
	env       []string
	readable  []string // roots a process may read, for explaining denials
	exec      []string // roots a process may execute from
	deny      []string // paths kept out of (DenyPaths, and where they lead)
	enforced  []string
	pgSeq     atomic.Uint64
	lease     *UIDLease    // the session user's id; nil without one
	etcDir    string       // the session user's account files
	tagCalls  bool         // calls are marked with a group of their own
	egress    net.Listener // the egress proxy's socket (network "allowlist"); nil otherwise

	mu     sync.Mutex // guards the fields below
	procs  map[*Process]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Cmd is one process to start.
type Cmd struct {
	// Args is the program and its arguments. A program without a slash is
	// looked up in the PATH the process gets.
	Args []string
	// Dir is the working directory; empty means the workspace.
	Dir string
	// Env holds extra variables on top of the runner's environment.
	Env []string
	// Stdin is the standard input; nil means /dev/null.
	Stdin io.Reader
	// Stderr, when set, receives the standard error instead of the output
	// pipe, for programs whose stdout is a protocol (MCP servers). The
	// caller closes its copy after Start.
	Stderr *os.File
}

// NewRunner checks cfg against the kernel and prepares a runner whose
// processes may write workspace and tempDir (created if missing). The
// runner must be closed. It takes over cfg.SessionUser: Close releases it,
// and so does NewRunner when it fails.
func NewRunner(cfg Config, workspace, tempDir string) (_ *Runner, err error) {
	lease := cfg.SessionUser
	defer func() {
		if err != nil {
			lease.Release()
		}
	}()
	cfg, err = cfg.normalize()
	if err != nil {
		return nil, err
	}
	if err := Check(cfg); err != nil {
		return nil, err
	}
	if workspace, err = absDir(workspace); err != nil {
		return nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	if err := os.MkdirAll(tempDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: temp dir: %w", err)
	}
	if tempDir, err = absDir(tempDir); err != nil {
		return nil, fmt.Errorf("sandbox: temp dir: %w", err)
	}
	var id identity
	if lease != nil {
		if os.Geteuid() != 0 {
			return nil, settingError(SettingSessionUsers, errors.New("sandbox: session users need the service to run as root"))
		}
		id = sessionIdentity(lease)
	} else if id, err = resolveIdentity(cfg.RunAsUser, workspace); err != nil {
		return nil, err
	}
	r := &Runner{
		cfg:       cfg,
		workspace: workspace,
		tempDir:   tempDir,
		id:        id,
		lease:     lease,
		log:       cfg.Logger,
		procs:     make(map[*Process]struct{}),
		env:       baseEnv(cfg, id, tempDir),
	}
	ok := false
	defer func() {
		if !ok {
			r.release()
		}
	}()
	setup := spawnSetup{
		newNet:   cfg.Network == NetworkNone || cfg.Network == NetworkAllowlist,
		egress:   cfg.Network == NetworkAllowlist,
		landlock: cfg.Backend == BackendLandlock,
	}
	mappedOwner := -1
	if id.session {
		if setup.mounts, mappedOwner, err = r.sessionMounts(); err != nil {
			return nil, err
		}
		if m := setup.mounts.idmap; m != nil {
			defer unix.Close(m.usernsFD)
		}
		registerUser(id.uid)
	}
	if id.switched {
		if err := os.Chown(tempDir, id.uid, id.gid); err != nil {
			return nil, fmt.Errorf("sandbox: give temp dir to %s: %w", id.name, err)
		}
		if err := accessibleBy(workspace, id, mappedOwner); err != nil {
			return nil, err
		}
		if err := accessibleBy(tempDir, id, -1); err != nil {
			return nil, err
		}
	}
	r.deny = denySet(cfg.DenyPaths)
	for _, d := range []string{workspace, tempDir} {
		if p, ok := r.denied(d); ok {
			return nil, fmt.Errorf("sandbox: %s lies in %s, which processes are kept out of", d, p)
		}
	}
	r.exec = slices.Concat([]string{workspace, tempDir}, cfg.ReadWritePaths, cfg.ReadOnlyPaths, DefaultReadOnlyPaths())
	r.readable = slices.Concat(r.exec, cfg.SessionReadOnlyPaths, alwaysReadable)
	if r.devNull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}

	if !cgroupsDisabled.Load() {
		cg, notes := newRunnerCgroups(cfg.Limits, cfg.Session)
		for _, n := range notes {
			r.log.Info("sandbox: cgroup unavailable, degrading", "reason", n)
		}
		if cg.unified != "" || cg.v1Pids != "" || cg.v1Memory != "" {
			r.cg = cg
			cg.prepare(cfg.Limits)
		}
	}
	// Without a cgroup to kill, a session user's calls are marked with a
	// group of their own, which every descendant inherits and none can
	// drop (no_new_privs, no CAP_SETGID): the tree is found by that mark.
	r.tagCalls = id.session && r.cg == nil
	r.rlimits = r.rlimitsFor(cfg.Limits)

	if setup.landlock {
		setup.rules = policyRules(cfg, workspace, tempDir)
	}
	if id.switched && len(r.rlimits) > 0 {
		setup.realID = &r.id
	}
	// Processes that stay root keep only the capabilities for files.
	setup.dropCaps = os.Geteuid() == 0 && id.uid == 0
	setup.noSubvolumes = cfg.NoSubvolumes
	if r.sp, err = startSpawner(setup); err != nil {
		return nil, err
	}
	if fd := r.sp.egressFD; fd >= 0 {
		r.sp.egressFD = -1 // egressListener takes it over
		if r.egress, err = egressListener(fd); err != nil {
			return nil, err
		}
		r.env = mergeEnv(r.env, proxyEnv(r.egress.Addr().(*net.TCPAddr).Port))
	}
	r.enforced = r.computeEnforced()
	ok = true
	return r, nil
}

// sessionUserName is the account name of every session user, in the
// /etc/passwd its processes see.
const sessionUserName = "toolwire"

// sessionIdentity is the identity of a session user: the leased id as user
// and group.
func sessionIdentity(l *UIDLease) identity {
	return identity{uid: l.ID(), gid: l.ID(), name: sessionUserName, switched: true, session: true}
}

// sessionMounts prepares the private mount namespace of a session user:
// an id-mapped workspace when another user owns it (the returned owner,
// -1 otherwise), and /etc/passwd and /etc/group that name the user.
func (r *Runner) sessionMounts() (*mountSetup, int, error) {
	m := &mountSetup{tempDir: r.tempDir}
	fi, err := os.Stat(r.workspace)
	if err != nil {
		return nil, -1, fmt.Errorf("sandbox: workspace: %w", err)
	}
	uid, gid, _ := ownerOf(fi)
	mapped := -1
	// Root's files are never shown as the session user's: a setuid or
	// setgid file the session made would be root's on disk.
	if uid != r.id.uid && uid != 0 {
		if gid == 0 {
			gid = r.id.gid
		}
		fd, err := newIDMapUserns(uid, gid, r.id.uid, r.id.gid)
		if err != nil {
			return nil, -1, err
		}
		m.idmap = &idmapMount{path: r.workspace, usernsFD: fd, from: uid, to: r.id.uid}
		mapped = uid
	}
	files, err := r.writeAccountFiles()
	if err != nil {
		if m.idmap != nil {
			unix.Close(m.idmap.usernsFD)
		}
		return nil, -1, err
	}
	m.files = files
	return m, mapped, nil
}

// writeAccountFiles writes copies of /etc/passwd and /etc/group with an
// entry for the session user, for the spawner to bind over the originals:
// programs that look up their own user (whoami, ssh, some build tools)
// then find one.
func (r *Runner) writeAccountFiles() ([]bindFile, error) {
	dir, err := os.MkdirTemp("", "toolwire-etc-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: account files: %w", err)
	}
	r.etcDir = dir
	entries := map[string]string{
		"passwd": fmt.Sprintf("%s:x:%d:%d:toolwire session user:%s:/bin/bash\n", r.id.name, r.id.uid, r.id.gid, r.tempDir),
		"group":  fmt.Sprintf("%s:x:%d:\n", r.id.name, r.id.gid),
	}
	var files []bindFile
	for _, name := range []string{"passwd", "group"} {
		orig := filepath.Join("/etc", name)
		b, err := os.ReadFile(orig)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox: account files: %w", err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		src := filepath.Join(dir, name)
		if err := os.WriteFile(src, append(b, entries[name]...), 0o644); err != nil {
			return nil, fmt.Errorf("sandbox: account files: %w", err)
		}
		files = append(files, bindFile{src: src, dst: orig})
	}
	return files, nil
}

// rlimitsFor lists the per-process limits, including the fallbacks for
// limits no cgroup controller enforces.
// cpuSeconds is a CPU time limit as RLIMIT_CPU counts it: whole seconds,
// rounded up.
func cpuSeconds(d time.Duration) uint64 { return uint64((d + time.Second - 1) / time.Second) }

func (r *Runner) rlimitsFor(l Limits) []rlimit {
	var out []rlimit
	if l.CPUTime > 0 {
		out = append(out, rlimit{unix.RLIMIT_CPU, cpuSeconds(l.CPUTime)})
	}
	if l.FileSize > 0 {
		out = append(out, rlimit{unix.RLIMIT_FSIZE, uint64(l.FileSize)})
	}
	if l.OpenFiles > 0 {
		out = append(out, rlimit{unix.RLIMIT_NOFILE, uint64(l.OpenFiles)})
	}
	if l.Memory > 0 && (r.cg == nil || (!r.cg.v2Memory && r.cg.v1Memory == "")) {
		r.log.Info("sandbox: no memory controller, limiting address space per process instead")
		out = append(out, rlimit{unix.RLIMIT_AS, uint64(l.Memory)})
	}
	if l.Processes > 0 && (r.cg == nil || (!r.cg.v2Pids && r.cg.v1Pids == "")) {
		r.log.Info("sandbox: no pids controller, limiting processes per user instead")
		out = append(out, rlimit{unix.RLIMIT_NPROC, uint64(l.Processes)})
	}
	return out
}

func (r *Runner) computeEnforced() []string {
	var e []string
	if r.cfg.Backend == BackendLandlock {
		e = append(e, "landlock_fs", "landlock_scope")
	}
	e = append(e, "no_new_privs")
	switch r.cfg.Network {
	case NetworkNone:
		e = append(e, "network_isolation")
	case NetworkAllowlist:
		e = append(e, "egress_allowlist")
	}
	if r.tagCalls || (r.cg != nil && (r.cg.unified != "" || r.cg.v1Pids != "")) {
		e = append(e, "process_tree")
	} else {
		e = append(e, "process_group")
	}
	if r.cfg.Limits.any() || (r.cg != nil && r.cg.bound != SessionBounds{}) {
		e = append(e, "resource_limits")
	}
	if os.Geteuid() != 0 || r.id.switched {
		e = append(e, "unprivileged_user")
	}
	if r.id.session {
		e = append(e, "pid_isolation")
	}
	return append(e, "clean_environment")
}

// Enforced lists the protections in force for this runner's processes, for
// capability reports: landlock_fs, landlock_scope, no_new_privs,
// network_isolation (network "none") or egress_allowlist (network
// "allowlist": a namespace of their own whose one way out is the egress
// proxy's socket), process_tree (whole-tree kill through a per-call
// cgroup, or for a session user through a per-call group) or
// process_group (kill through the process group only), resource_limits,
// unprivileged_user, pid_isolation (a session user of its own, with a
// /proc that shows only its processes), clean_environment.
func (r *Runner) Enforced() []string { return append([]string(nil), r.enforced...) }

// Workspace returns the runner's workspace directory.
func (r *Runner) Workspace() string { return r.workspace }

// TempDir returns the runner's scratch directory (TMPDIR of its processes,
// and HOME unless Config.Home says otherwise).
func (r *Runner) TempDir() string { return r.tempDir }

// Bounds returns the session bounds the runner's cgroup enforces: those of
// Config.Session that a controller could take (zero fields are not
// enforced).
func (r *Runner) Bounds() SessionBounds {
	if r.cg == nil {
		return SessionBounds{}
	}
	return r.cg.bound
}

// Network returns the network mode of the runner's processes:
// NetworkNone, NetworkAllowlist or NetworkHost.
func (r *Runner) Network() string { return r.cfg.Network }

// EgressListener returns, with network NetworkAllowlist, the listening
// socket at 127.0.0.1 inside the processes' network namespace that their
// HTTP_PROXY and HTTPS_PROXY name; nil otherwise. The caller serves it
// with the egress proxy (pkg/egress) from its own namespace; Close closes
// it.
func (r *Runner) EgressListener() net.Listener { return r.egress }

// Home returns HOME of the runner's processes.
func (r *Runner) Home() string { return lookEnv(r.env, "HOME") }

// User returns the name of the user processes run as.
func (r *Runner) User() string { return r.id.name }

// UID returns the user id processes run as.
func (r *Runner) UID() int { return r.id.uid }

// GID returns the group id processes run as.
func (r *Runner) GID() int { return r.id.gid }

// Start starts c. The process and everything it starts form one tree that
// Kill, Wait and Close end together; ctx only bounds the start itself.
func (r *Runner) Start(ctx context.Context, c Cmd) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.Args) == 0 {
		return nil, errors.New("sandbox: empty command")
	}
	env := mergeEnv(r.env, c.Env)
	dir := c.Dir
	if dir == "" {
		dir = r.workspace
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: working directory %q is not absolute", dir)
	}
	if d, ok := r.denied(dir); ok {
		return nil, denied("sandbox refused working directory %s: it lies in %s, which processes are kept out of (keys and credentials)", dir, d)
	}
	if !r.mayUse(dir, r.readable) {
		return nil, denied("sandbox refused working directory %s: processes may only work in the workspace (%s), the temp dir and the allowed read-only paths", dir, r.workspace)
	}
	path, err := lookPath(c.Args[0], lookEnv(env, "PATH"), dir)
	if err != nil {
		return nil, err
	}
	if d, ok := r.denied(path); ok {
		return nil, denied("sandbox refused to execute %s: it lies in %s, which processes are kept out of (keys and credentials)", path, d)
	}
	if !r.mayUse(path, r.exec) {
		return nil, denied("sandbox refused to execute %s: programs may only run from the workspace, the temp dir and the system directories", path)
	}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.wg.Add(1)
	r.mu.Unlock()
	p, err := r.start(path, dir, env, c)
	if err != nil {
		r.wg.Done()
		return nil, err
	}
	r.mu.Lock()
	r.procs[p] = struct{}{}
	closed := r.closed
	r.mu.Unlock()
	p.startWatch()
	go p.waitLoop()
	if closed {
		p.killNow()
	}
	return p, nil
}

func (r *Runner) start(path, dir string, env []string, c Cmd) (*Process, error) {
	outR, outW, err := outputPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: output pipe: %w", err)
	}
	defer unix.Close(outW)
	p := &Process{r: r, out: outR, done: make(chan struct{})}
	stdin, err := p.stdinFile(c.Stdin)
	errW := outW
	if c.Stderr != nil {
		errW = int(c.Stderr.Fd())
	}
	if err == nil {
		err = r.givePipe(outW, p.stdinChild, c.Stderr)
	}
	if err != nil {
		p.closeStdin()
		outR.Close()
		return nil, err
	}
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if r.id.switched {
		sys.Credential = &syscall.Credential{Uid: uint32(r.id.uid), Gid: uint32(r.id.gid), Groups: []uint32{}}
	}
	if r.tagCalls {
		tag, err := r.lease.pool.Lease()
		if err != nil {
			p.closeStdin()
			outR.Close()
			return nil, err
		}
		p.tag = tag
		sys.Credential.Groups = []uint32{uint32(tag.ID())}
	}
	req := &spawnReq{
		path:     path,
		argv:     c.Args,
		dir:      dir,
		env:      env,
		sys:      sys,
		cgroupFD: -1,
		limits:   r.rlimits,
	}
	in := -1
	if stdin != nil {
		in = int(stdin.Fd())
	}
	req.files = []int{in, outW, errW}
	if r.cg != nil {
		cc, err := r.cg.newCall(r.cfg.Limits)
		if err != nil {
			p.closeStdin()
			outR.Close()
			return nil, err
		}
		p.cg = cc
		if cc.dirFD >= 0 {
			sys.UseCgroupFD, req.cgroupFD = true, cc.dirFD
		}
		for i, f := range cc.v1Tasks {
			req.join = append(req.join, int(f.Fd()))
			req.leave = append(req.leave, int(r.cg.v1Home[i].Fd()))
		}
		p.key = cc.key
	} else {
		p.key = "pgid/" + strconv.FormatUint(r.pgSeq.Add(1), 10)
	}
	req.stop = len(req.limits) > 0
	sessionUID := -1
	if r.id.session {
		sessionUID = r.id.uid
	}
	registerCall(p.key, sessionUID)
	proc, err := r.sp.start(req)
	if p.stdinChild != nil {
		p.stdinChild.Close()
	}
	if err != nil {
		unregisterCall(p.key, 0)
		if p.cg != nil {
			p.cg.kill()
			r.cg.discard(p.cg)
		}
		p.tag.Release()
		p.closeStdin()
		outR.Close()
		return nil, r.explainStartError(path, dir, err)
	}
	p.proc = proc
	setCallPid(p.key, proc.Pid, p.cg == nil)
	p.startStdinCopy()
	return p, nil
}

// givePipe hands pipes to the sandbox user, so that its processes can
// reopen them through /dev/stdout, /dev/stderr or /proc/self/fd: the
// output pipe's write end, and stdin and stderr files when set.
func (r *Runner) givePipe(out int, files ...*os.File) error {
	if !r.id.switched {
		return nil
	}
	if err := unix.Fchown(out, r.id.uid, r.id.gid); err != nil {
		return fmt.Errorf("sandbox: pipe owner: %w", err)
	}
	for _, f := range files {
		if f == nil {
			continue
		}
		if err := f.Chown(r.id.uid, r.id.gid); err != nil {
			return fmt.Errorf("sandbox: pipe owner: %w", err)
		}
	}
	return nil
}

// outputPipe makes the pipe a call's processes write their output to. The
// read end is an *os.File in the runtime's poller; the write end stays a
// bare descriptor, since only the child uses it: making it an *os.File
// too (as os.Pipe does) would register it with the poller and switch it
// to non-blocking and back before the fork, six system calls a call for
// nothing.
func outputPipe() (*os.File, int, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, -1, err
	}
	return os.NewFile(uintptr(fds[0]), "|0"), fds[1], nil
}

// explainStartError turns a failed start into an error that names what was
// refused.
func (r *Runner) explainStartError(path, dir string, err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		if _, statErr := os.Stat(dir); statErr == nil && r.cfg.Backend == BackendLandlock {
			return denied("sandbox refused to start %s in %s: %v (the policy or file permissions of user %s forbid it)", path, dir, unwrapPathError(err), r.id.name)
		}
		return denied("sandbox refused to start %s in %s: %v", path, dir, unwrapPathError(err))
	}
	return fmt.Errorf("sandbox: start %s: %w", path, err)
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Close kills every process the runner started, waits until they are gone
// and releases the runner. It is idempotent.
func (r *Runner) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return
	}
	r.closed = true
	procs := make([]*Process, 0, len(r.procs))
	for p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.killNow()
	}
	r.wg.Wait()
	r.release()
}

// sessionEndTimeout bounds how long Close keeps killing a session user's
// processes (one stuck in the kernel cannot die until it returns).
const sessionEndTimeout = 10 * time.Second

func (r *Runner) release() {
	if r.sp != nil {
		r.sp.stop()
		if r.egress != nil {
			r.egress.Close()
		}
	}
	if r.id.session {
		r.endSessionUser()
	}
	if r.cg != nil {
		r.cg.remove()
	}
	if r.devNull != nil {
		r.devNull.Close()
	}
	if r.etcDir != "" {
		os.RemoveAll(r.etcDir)
	}
}

// endSessionUser kills every process of the session user, wherever it went
// (out of its call's process group, cgroup or group mark; orphaned to this
// process or not), reaps those that are this process's children, and gives
// the id back. An id with a process left is not given back: the next
// session would inherit it.
func (r *Runner) endSessionUser() {
	uid := r.id.uid
	var gone bool
	if r.cg != nil && r.cg.holdsAll() {
		// Every process of the session sits in the runner's cgroup tree,
		// which none can leave: killing the tree ends them all, without a
		// look at the machine's other processes.
		gone = r.cg.killTree(sessionEndTimeout)
	} else {
		gone = killAll(func(pi procInfo) bool { return pi.hasUID(uid) }, sessionEndTimeout, false)
	}
	reapUser(uid)
	unregisterUser(uid)
	if !gone {
		r.log.Error("sandbox: processes of the session user survived session end; its id stays out of the pool", "uid", uid)
		return
	}
	r.lease.Release()
}

func (r *Runner) forget(p *Process) {
	r.mu.Lock()
	delete(r.procs, p)
	r.mu.Unlock()
	r.wg.Done()
}

// lookPath resolves a program name like the shell would, with the PATH of
// the process.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("sandbox: %s: executable file not found in PATH", name)
}

// denied returns the denied path that p is or lies in, when Landlock is
// on.
func (r *Runner) denied(p string) (string, bool) {
	if r.cfg.Backend != BackendLandlock {
		return "", false
	}
	for _, d := range r.deny {
		if within(p, d) {
			return d, true
		}
	}
	return "", false
}

// mayUse reports whether the policy lets processes reach p, which is not
// denied: under one of roots, or anywhere but /dev with ReadAll.
func (r *Runner) mayUse(p string, roots []string) bool {
	if r.cfg.Backend != BackendLandlock || (r.cfg.ReadAll && !within(p, "/dev")) {
		return true
	}
	return under(p, roots)
}

// under reports whether path is one of roots or inside one.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

func absDir(d string) (string, error) {
	d, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	d, err = filepath.EvalSymlinks(d)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(d)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", d)
	}
	return d, nil
}

// accessibleBy checks that id can reach and write dir, by mode bits. A
// mappedOwner of 0 or more is the on-disk owner of dir that an id-mapped
// mount shows as id's.
func accessibleBy(dir string, id identity, mappedOwner int) error {
	need := func(p string, bits os.FileMode) error {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		var have os.FileMode
		switch {
		case int(st.Uid) == id.uid, p == dir && mappedOwner >= 0 && int(st.Uid) == mappedOwner:
			have = mode >> 6
		case int(st.Gid) == id.gid:
			have = mode >> 3
		default:
			have = mode
		}
		if have&bits != bits {
			what := "pass through it"
			if p == dir {
				what = "write in it"
			}
			err := fmt.Errorf("sandbox: %s is not accessible to user %s (uid %d), who runs the tools and must %s: mode %04o, owner uid %d",
				p, id.name, id.uid, what, uint32(fi.Mode().Perm()), st.Uid)
			if id.session {
				return settingError(SettingSessionWorkspace, fmt.Errorf("%w; a session's user works only in a workspace made for it or owned by a user other than root, under directories others may search (o+x)", err))
			}
			return settingError(SettingUser, err)
		}
		return nil
	}
	if err := need(dir, 0o7); err != nil {
		return err
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if err := need(p, 0o1); err != nil {
			return err
		}
		if p == "/" {
			return nil
		}
	}
}

// ownerOf returns the owner of a stat result.
func ownerOf(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
