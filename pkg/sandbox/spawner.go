package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// spawner owns the OS thread that holds a runner's confinement and forks
// its children.
type spawner struct {
	reqs chan *spawnReq
	done chan struct{}
	// egressFD is the egress proxy's listening socket, made inside the
	// thread's network namespace (spawnSetup.egress); -1 without one.
	egressFD int
	// private: the thread has a file table of its own (see
	// privateFiles). A request's descriptors then reach it over a socket
	// pair: sendFD in the service's table, recvFD in the thread's. Set
	// before the thread reports ready.
	private        bool
	sendFD, recvFD int
	recvLocal      int        // recvFD's number in the thread's table
	sendMu         sync.Mutex // keeps requests and their descriptors in one order
	tid            int        // the thread's id
}

// spawnSetup is what the spawner thread applies to itself once.
type spawnSetup struct {
	newNet bool
	// egress makes the egress proxy's listening socket in the new network
	// namespace.
	egress bool
	// mounts, when set, gives the thread a private mount namespace set up
	// for a session user (see setupMounts).
	mounts *mountSetup
	// landlock and rules: the Landlock domain, built on the thread once its
	// mounts are in place, so that the rules name what its children will
	// see (a fresh /proc is a different inode from the service's).
	landlock bool
	rules    []pathRule
	// realID makes the thread's real uid/gid those of the children while it
	// stays root otherwise, so that it may prlimit them without
	// CAP_SYS_RESOURCE (prlimit checks the caller's real ids against the
	// target's).
	realID *identity
	// dropCaps empties the thread's capability bounding set but for the
	// file capabilities (keptCaps), so that children that stay root gain
	// no other capability at exec.
	dropCaps bool
	// noSubvolumes installs the seccomp filter of refuseSubvolumes.
	noSubvolumes bool
}

// keptCaps are the capabilities a process that runs as root keeps: those
// that let root work on files of other owners, which Landlock confines.
// Tracing and reading other processes' memory and environment, the
// network's configuration, modules, mounts, clocks, reboot, raw I/O,
// changing user and the rest are gone.
var keptCaps = map[uintptr]bool{
	unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_DAC_READ_SEARCH: true,
	unix.CAP_FOWNER: true, unix.CAP_FSETID: true, unix.CAP_NET_BIND_SERVICE: true,
}

// spawnReq is one process to start. Descriptors are numbers in the
// service's file table, which the spawner thread does not share.
type spawnReq struct {
	path     string
	argv     []string
	dir      string
	env      []string
	files    []int // the child's 0, 1, 2...; -1 leaves one closed
	sys      *syscall.SysProcAttr
	cgroupFD int // with sys.UseCgroupFD: the cgroup v2 directory
	// join are the tasks files of the call's v1 directories, leave those
	// of the same hierarchies that the thread goes back to (see spawnOne).
	join, leave []int
	stop        bool // the child stops at exec for the steps below
	limits      []rlimit
	pid         int
	err         error
	done        chan struct{}
}

// fds lists the request's descriptors: its files, then the cgroup
// directory, then the v1 tasks files to join and to leave.
func (r *spawnReq) fds() []int {
	return slices.Concat(r.files, []int{r.cgroupFD}, r.join, r.leave)
}

type rlimit struct {
	resource int
	value    uint64
}

// startSpawner starts the thread and applies setup to it. On error the
// thread is gone again.
func startSpawner(setup spawnSetup) (*spawner, error) {
	s := &spawner{reqs: make(chan *spawnReq), done: make(chan struct{}), egressFD: -1, sendFD: -1, recvFD: -1}
	if pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0); err == nil {
		s.sendFD, s.recvFD = pair[0], pair[1]
		// Here, not on the thread: its view of /proc is the session's.
		runtimeFDs()
	}
	ready := make(chan error, 1)
	go s.run(setup, ready)
	err := <-ready
	if s.recvFD >= 0 {
		// A private thread has its own copy of the receiving end.
		unix.Close(s.recvFD)
	}
	if !s.private && s.sendFD >= 0 {
		unix.Close(s.sendFD)
		s.sendFD = -1
	}
	if err != nil {
		<-s.done
		if s.sendFD >= 0 {
			unix.Close(s.sendFD)
		}
		return nil, err
	}
	return s, nil
}

// run is the thread's whole life. It never unlocks the thread: when it
// returns, the Go runtime ends the thread instead of reusing it.
func (s *spawner) run(setup spawnSetup, ready chan<- error) {
	defer close(s.done)
	runtime.LockOSThread()
	s.tid = unix.Gettid()
	fd, err := setupThread(setup)
	if err == nil && s.recvFD >= 0 {
		// Last, once setupThread's own descriptors are closed in the
		// shared table.
		if s.recvLocal, s.private, err = privateFiles(s.recvFD); err != nil && fd >= 0 {
			unix.Close(fd)
		}
	}
	if err != nil {
		ready <- err
		return
	}
	s.egressFD = fd
	ready <- nil
	for r := range s.reqs {
		r.pid, r.err = s.spawnOne(r)
		close(r.done)
	}
}

// runtimeFDs are the descriptors of the Go runtime's network poller, which
// the runtime may use on any thread.
var runtimeFDs = sync.OnceValue(func() []int {
	// A pipe makes the runtime set its poller up, if nothing has yet.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	var fds []int
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == "anon_inode:[eventpoll]" || l == "anon_inode:[eventfd]" {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds)
	return fds
})

// privateFiles gives the calling thread a file table of its own that holds
// only the standard descriptors, the runtime's and keep. fork copies the
// whole table of the thread that forks and execve then closes every copy;
// from the service's table, which holds every open session's pipes,
// sockets and cgroup files, starting a process cost time in proportion to
// the sessions open. The thread gets what a child needs over keep, a unix
// socket (SCM_RIGHTS), starts it and closes the copies. It reports false,
// and changes nothing, where the thread may not have a table of its own
// (unshare refused, as by some seccomp profiles): it then shares the
// service's.
//
// keep's number in the thread's table is returned: a low one, since fork
// copies the table up to its highest open descriptor.
func privateFiles(keep int) (local int, private bool, err error) {
	if sharedFilesOnly.Load() {
		return keep, false, nil
	}
	if err := unix.Unshare(unix.CLONE_FILES); err != nil {
		return keep, false, nil
	}
	fds := append(slices.Clone(runtimeFDs()), keep)
	slices.Sort(fds)
	from := 3
	for _, fd := range append(fds, math.MaxInt32) {
		if fd > from {
			if err := unix.CloseRange(uint(from), uint(fd-1), 0); err != nil {
				return keep, true, fmt.Errorf("sandbox: spawner file table: %w", err)
			}
		}
		from = max(from, fd+1)
	}
	if low, err := unix.FcntlInt(uintptr(keep), unix.F_DUPFD_CLOEXEC, 3); err == nil {
		if low < keep {
			unix.Close(keep)
			keep = low
		} else {
			unix.Close(low)
		}
	}
	return keep, true, nil
}

// sharedFilesOnly makes spawner threads share the service's file table,
// as where unshare is refused; tests set it.
var sharedFilesOnly atomic.Bool

// passFDs sends fds over the spawner's socket, in the order given; -1
// entries are left out.
func (s *spawner) passFDs(fds []int) error {
	var list []int
	for _, fd := range fds {
		if fd >= 0 {
			list = append(list, fd)
		}
	}
	if err := unix.Sendmsg(s.sendFD, []byte{0}, unix.UnixRights(list...), nil, 0); err != nil {
		return fmt.Errorf("sandbox: hand descriptors to the spawner: %w", err)
	}
	return nil
}

// receiveFDs takes the descriptors of the next request off the socket and
// returns them in place of fds (-1 entries stay -1).
func (s *spawner) receiveFDs(fds []int) ([]int, error) {
	want := 0
	for _, fd := range fds {
		if fd >= 0 {
			want++
		}
	}
	oob := make([]byte, unix.CmsgSpace(4*want))
	var b [1]byte
	_, oobn, _, _, err := unix.Recvmsg(s.recvLocal, b[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sandbox: spawner descriptors: %w", err)
	}
	var got []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err == nil {
		for _, m := range msgs {
			fs, err := unix.ParseUnixRights(&m)
			if err == nil {
				got = append(got, fs...)
			}
		}
	}
	if len(got) != want {
		for _, fd := range got {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("sandbox: spawner got %d descriptors, want %d", len(got), want)
	}
	out := make([]int, len(fds))
	for i, fd := range fds {
		out[i] = -1
		if fd >= 0 {
			out[i], got = got[0], got[1:]
		}
	}
	return out, nil
}

// setupThread confines the calling thread; it returns the egress
// proxy's socket when setup asks for one, else -1.
func setupThread(setup spawnSetup) (egressFD int, err error) {
	egressFD = -1
	defer func() {
		if err != nil && egressFD >= 0 {
			unix.Close(egressFD)
			egressFD = -1
		}
	}()
	var flags int
	if setup.newNet {
		flags |= unix.CLONE_NEWNET
	}
	if setup.mounts != nil {
		flags |= unix.CLONE_NEWNS
	}
	if flags != 0 {
		if err := unix.Unshare(flags); err != nil {
			return egressFD, fmt.Errorf("sandbox: namespaces: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
		}
	}
	if setup.mounts != nil {
		if err := setupMounts(setup.mounts); err != nil {
			return -1, err
		}
	}
	if setup.newNet {
		if err := loopbackUp(); err != nil {
			return -1, err
		}
		if setup.egress {
			if egressFD, err = listenEgress(); err != nil {
				return -1, err
			}
		}
	}
	if id := setup.realID; id != nil {
		// Raw syscalls: the libc-style wrappers would change every thread.
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id.gid), ^uintptr(0), ^uintptr(0)); e != 0 {
			return egressFD, fmt.Errorf("sandbox: spawner real gid: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id.uid), ^uintptr(0), ^uintptr(0)); e != 0 {
			return egressFD, fmt.Errorf("sandbox: spawner real uid: %w", e)
		}
	}
	if setup.dropCaps {
		for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
			if keptCaps[c] {
				continue
			}
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return egressFD, fmt.Errorf("sandbox: drop capability %d from the bounding set: %w", c, err)
			}
		}
	}
	// no_new_privs holds for the thread and its children even without
	// Landlock: no setuid binary can regain privileges.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return egressFD, fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if setup.noSubvolumes {
		if err := refuseSubvolumes(); err != nil {
			return egressFD, err
		}
	}
	if setup.landlock {
		fd, err := buildRuleset(setup.rules)
		if err != nil {
			return egressFD, err
		}
		defer unix.Close(fd)
		return egressFD, restrictThread(fd)
	}
	return egressFD, nil
}

// loopbackUp brings up "lo" in the thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("sandbox: loopback: %w", err)
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("sandbox: loopback up: %w%s", err, capHint(err, "CAP_NET_ADMIN"))
	}
	return nil
}

// spawnOne starts one process on the spawner thread. A child starts in the
// cgroups of the thread that forks it; in cgroup v1 a thread may be moved
// alone, so the thread joins the call's v1 directories for the fork and
// goes back after it: the child is in them from its first instruction,
// with no stop on the way (cgroup v2 has CLONE_INTO_CGROUP). With r.stop
// the child stops right after its execve (PTRACE_TRACEME) to get its
// rlimits before it runs anything, then it is let go.
func (s *spawner) spawnOne(r *spawnReq) (int, error) {
	fds := r.fds()
	if s.private {
		local, err := s.receiveFDs(fds)
		if err != nil {
			return 0, err
		}
		defer func() {
			for _, fd := range local {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
		}()
		fds = local
	}
	attr := &syscall.ProcAttr{Dir: r.dir, Env: r.env}
	for _, fd := range fds[:len(r.files)] {
		attr.Files = append(attr.Files, uintptr(fd))
	}
	sys := *r.sys
	sys.Ptrace = r.stop
	sys.CgroupFD = fds[len(r.files)]
	attr.Sys = &sys
	join := fds[len(r.files)+1:][:len(r.join)]
	leave := fds[len(r.files)+1+len(r.join):]
	if err := s.moveTo(join); err != nil {
		if back := s.moveTo(leave); back != nil {
			return 0, fmt.Errorf("sandbox: leave call cgroup: %w", back)
		}
		return 0, fmt.Errorf("sandbox: join call cgroup: %w", err)
	}
	pid, err := syscall.ForkExec(r.path, r.argv, attr)
	// Back before anything else: the thread must not count as one of the
	// call's processes, nor stay where the call's processes are killed.
	back := s.moveTo(leave)
	if err != nil {
		err = &os.PathError{Op: "fork/exec", Path: r.path, Err: err}
		if back != nil {
			return 0, fmt.Errorf("sandbox: leave call cgroup: %w (after %w)", back, err)
		}
		return 0, err
	}
	fail := func(err error) (int, error) {
		unix.Kill(pid, unix.SIGKILL)
		waitChild(pid)
		return 0, err
	}
	if back != nil {
		return fail(fmt.Errorf("sandbox: leave call cgroup: %w", back))
	}
	if !r.stop {
		return pid, nil
	}
	ws, err := waitChild(pid)
	if err != nil {
		return fail(fmt.Errorf("sandbox: wait for exec stop: %w", err))
	}
	if !ws.Stopped() {
		return 0, fmt.Errorf("sandbox: child ended before exec stop (status %v)", ws)
	}
	for _, l := range r.limits {
		lim := unix.Rlimit{Cur: l.value, Max: l.value}
		if l.resource == unix.RLIMIT_CPU {
			// SIGXCPU at the limit, SIGKILL a second later if ignored.
			lim.Max++
		}
		if err := unix.Prlimit(pid, l.resource, &lim, nil); err != nil {
			return fail(fmt.Errorf("sandbox: set %s: %w", rlimitName(l.resource), err))
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fail(fmt.Errorf("sandbox: release child: %w", err))
	}
	return pid, nil
}

// moveTo moves the spawner thread, alone, into the cgroup v1 directories
// whose tasks files are open at fds. It writes "0", the writing thread,
// rather than its id: for "0" alone the kernel skips the lock that holds
// every fork and exit of the machine still while a task moves, and whose
// taking waits for an RCU grace period once it has gone unused for a
// while (10-15 ms here, which a call after an idle moment paid once per
// moved task).
func (s *spawner) moveTo(fds []int) error {
	for _, fd := range fds {
		if _, err := unix.Write(fd, currentThread); err != nil {
			return err
		}
	}
	return nil
}

// currentThread is what a tasks file reads as the writing thread.
var currentThread = []byte("0")

// waitChild waits for the child pid to stop or end.
func waitChild(pid int) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if !errors.Is(err, unix.EINTR) {
			return ws, err
		}
	}
}

// start hands r to the spawner thread and waits for the result.
func (s *spawner) start(r *spawnReq) (*os.Process, error) {
	r.done = make(chan struct{})
	s.sendMu.Lock()
	select {
	case <-s.done:
		s.sendMu.Unlock()
		return nil, ErrClosed
	default:
	}
	if s.private {
		if err := s.passFDs(r.fds()); err != nil {
			s.sendMu.Unlock()
			return nil, err
		}
	}
	select {
	case s.reqs <- r:
	case <-s.done:
		s.sendMu.Unlock()
		return nil, ErrClosed
	}
	s.sendMu.Unlock()
	<-r.done
	if r.err != nil {
		return nil, r.err
	}
	// Here, not on the spawner thread, so that the process's pidfd lands
	// in the service's table. The child is not waited for before its
	// Process is made: its pid cannot be reused before.
	return os.FindProcess(r.pid)
}

// stop ends the spawner thread.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
	if s.sendFD >= 0 {
		unix.Close(s.sendFD)
	}
}

func rlimitName(res int) string {
	switch res {
	case unix.RLIMIT_CPU:
		return "RLIMIT_CPU"
	case unix.RLIMIT_FSIZE:
		return "RLIMIT_FSIZE"
	case unix.RLIMIT_NOFILE:
		return "RLIMIT_NOFILE"
	case unix.RLIMIT_AS:
		return "RLIMIT_AS"
	case unix.RLIMIT_NPROC:
		return "RLIMIT_NPROC"
	}
	return fmt.Sprintf("rlimit %d", res)
}
