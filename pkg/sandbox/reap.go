package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process the reaper of orphans in its
// subtree (PR_SET_CHILD_SUBREAPER), so that processes a sandboxed command
// double-forks or setsid()s away are re-parented here rather than to the
// machine's init, and starts the reaper that collects them.
//
// The reaper waits only for zombies it can prove are orphans of a sandboxed
// call: children of this process that sit in one of its call cgroups and are
// not the call's own first process (which its Process waits for). It never
// calls wait4(-1), so it cannot steal the exit status of a child started
// with os/exec elsewhere in the program. It runs for the rest of the process.
// Call it once, early in main.
//
// It watches SIGCHLD only while orphans are about (see collectOrphans): a
// call that leaves none costs no wake-up of the signal's goroutines when
// its process ends, which would otherwise run just before the call's
// result goes out.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: become subreaper: %w", err)
	}
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.ch == nil {
		reaper.ch = make(chan os.Signal, 1)
		go reapLoop(reaper.ch)
	}
	return nil
}

// reaper decides when SIGCHLD is watched. Orphans are found by a scan of
// the main thread's children (reapOrphans) when a call ends, now and then
// while a call runs (Process.check) and, while SIGCHLD is watched, at each
// child's exit. A scan that finds an orphan of a call, ended or not, turns
// the watching on, so that the orphan is reaped as soon as it exits; once
// scans have found none for watchLinger, it is turned off again.
var reaper struct {
	mu       sync.Mutex     // serialises scans with changes of watching
	ch       chan os.Signal // SIGCHLD arrives here while watching; nil: not a subreaper
	watching bool
	lastSeen time.Time   // when a scan last found an orphan
	lastScan time.Time   // when the last scan ran
	off      *time.Timer // runs stopWatching; pending when offSet
	offSet   bool
}

// watchLinger is how long SIGCHLD stays watched after the last orphan was
// seen: a command that keeps leaving orphans keeps it on rather than
// turning it on and off with each of its calls. Read under reaper.mu; a
// variable for tests.
var watchLinger = time.Second

// orphanPoll is the least time between two scans of running calls' checks.
const orphanPoll = 50 * time.Millisecond

// reapLoop collects orphans whenever a child changes state while SIGCHLD
// is watched.
func reapLoop(ch <-chan os.Signal) {
	for range ch {
		collectOrphans()
	}
}

// collectOrphans reaps the orphans that have ended and watches SIGCHLD
// while any, ended or alive, are found.
func collectOrphans() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	reaper.lastScan = time.Now()
	if !reapOrphans() {
		if reaper.watching && !reaper.offSet {
			armStopLocked(watchLinger)
		}
		return
	}
	reaper.lastSeen = time.Now()
	if reaper.watching || reaper.ch == nil {
		return
	}
	signal.Notify(reaper.ch, unix.SIGCHLD)
	reaper.watching = true
	// Orphans that ended before the line above signalled nobody.
	reapOrphans()
}

// pollOrphans is collectOrphans for a running call's periodic check: it
// looks only while SIGCHLD is not watched (an orphan's exit would have
// been noticed) and not more often than orphanPoll in all, however many
// calls run.
func pollOrphans() {
	reaper.mu.Lock()
	skip := reaper.watching || time.Since(reaper.lastScan) < orphanPoll
	reaper.mu.Unlock()
	if !skip {
		collectOrphans()
	}
}

// stopWatching turns SIGCHLD off when no orphan has been seen for
// watchLinger and none is found now.
func stopWatching() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	reaper.offSet = false
	if !reaper.watching {
		return
	}
	if wait := watchLinger - time.Since(reaper.lastSeen); wait > 0 {
		armStopLocked(wait)
		return
	}
	reaper.lastScan = time.Now()
	if reapOrphans() {
		reaper.lastSeen = time.Now()
		armStopLocked(watchLinger)
		return
	}
	signal.Stop(reaper.ch)
	reaper.watching = false
}

// armStopLocked has stopWatching run after d.
func armStopLocked(d time.Duration) {
	reaper.offSet = true
	if reaper.off == nil {
		reaper.off = time.AfterFunc(d, stopWatching)
	} else {
		reaper.off.Reset(d)
	}
}

// calls maps the cgroup key of every live call of this process to the pid
// of the call's first process (0 while it is being started).
var calls struct {
	mu      sync.Mutex // guards the fields below and serialises scans
	m       map[string]int
	pgid    map[int]bool   // process groups of calls without a cgroup
	userOf  map[string]int // session user of a call, for calls that have one
	users   map[int]int    // session users of live runners (a count each)
	checkID bool           // users is not empty: zombies' ids are worth reading
}

func initCallsLocked() {
	if calls.m == nil {
		calls.m = make(map[string]int)
		calls.pgid = make(map[int]bool)
		calls.userOf = make(map[string]int)
		calls.users = make(map[int]int)
	}
}

// registerCall records a call being started; sessionUID is its session
// user, -1 for none.
func registerCall(key string, sessionUID int) {
	calls.mu.Lock()
	initCallsLocked()
	calls.m[key] = 0
	if sessionUID >= 0 {
		calls.userOf[key] = sessionUID
	}
	calls.mu.Unlock()
}

// registerUser records a session user whose orphans the reaper may collect:
// every process of the id is a sandboxed process of this service.
func registerUser(uid int) {
	calls.mu.Lock()
	initCallsLocked()
	calls.users[uid]++
	calls.checkID = true
	calls.mu.Unlock()
}

func unregisterUser(uid int) {
	calls.mu.Lock()
	if calls.users[uid] > 0 {
		if calls.users[uid]--; calls.users[uid] == 0 {
			delete(calls.users, uid)
		}
	}
	calls.checkID = len(calls.users) > 0
	calls.mu.Unlock()
}

// reapUser waits for every zombie child of this process that ran as uid
// and is not a call's first process.
func reapUser(uid int) {
	kids := ownChildren()
	if len(kids) == 0 {
		return
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	for _, pid := range kids {
		pi, ok := readProcInfo(pid)
		if !ok || pi.state != 'Z' || !pi.hasUID(uid) || isFirstLocked(pid) {
			continue
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

func isFirstLocked(pid int) bool {
	for _, first := range calls.m {
		if first == pid {
			return true
		}
	}
	return false
}

func setCallPid(key string, pid int, pgid bool) {
	calls.mu.Lock()
	calls.m[key] = pid
	if pgid {
		calls.pgid[pid] = true
	}
	calls.mu.Unlock()
}

func unregisterCall(key string, pid int) {
	calls.mu.Lock()
	delete(calls.m, key)
	delete(calls.pgid, pid)
	delete(calls.userOf, key)
	calls.mu.Unlock()
}

// reapOrphans waits for every zombie child of this process that is an
// orphan of a registered call, and reports whether it found any orphan,
// ended or alive. It looks for them among the main thread's children
// only, where orphans land: a call that left nothing behind costs one
// read of a short file, however many threads (sessions) the process has.
// (waitid(P_ALL, WNOHANG|WNOWAIT) would tell as well whether any child is
// a zombie, but the kernel walks every thread's children for it: 9 µs
// with 1,000 threads against 0.5 µs with none.)
func reapOrphans() (found bool) {
	kids := ownChildren()
	if len(kids) == 0 {
		return false
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	self := os.Getpid()
	for _, pid := range kids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		state, ppid, pgrp, ok := parseStat(stat)
		if !ok || ppid != self || !isOrphanLocked(pid, pgrp) {
			continue
		}
		found = true
		if state == 'Z' {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
	return found
}

// isOrphanLocked reports whether the zombie pid is an orphan of a call of
// this process: it ran as a live session user, or it sits in one of this
// process's call cgroups (the call may have ended already: orphans can be
// re-parented here after their call's cgroup emptied), and it is not a
// call's first process, which its Process waits for.
func isOrphanLocked(pid, pgrp int) bool {
	if isFirstLocked(pid) {
		return false
	}
	if calls.checkID {
		if pi, ok := readProcInfo(pid); ok && calls.users[pi.uids[0]] > 0 {
			return !startingLocked(pi.uids[0])
		}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err == nil {
		prefix := fmt.Sprintf("toolwire-%d-", os.Getpid())
		for _, line := range strings.Split(string(b), "\n") {
			i := strings.LastIndexByte(line, ':')
			if i < 0 {
				continue
			}
			path := line[i+1:]
			// A call cgroup path ends with "<runner>/c<n>".
			runner := filepath.Base(filepath.Dir(path))
			if !strings.HasPrefix(runner, prefix) {
				continue
			}
			if first, ok := calls.m[runner+"/"+filepath.Base(path)]; ok && first == 0 {
				return false // still starting: its first pid is not known yet
			}
			return true
		}
	}
	return calls.pgid[pgrp] && pgrp != pid
}

// startingLocked reports whether a call of session user uid is being
// started: its first process may already be a zombie whose pid is not
// known yet.
func startingLocked(uid int) bool {
	for key, u := range calls.userOf {
		if u == uid && calls.m[key] == 0 {
			return true
		}
	}
	return false
}

// ownChildren lists the children of this process's main thread. Orphans
// are re-parented to the first live thread of the subreaper, its main
// thread, so that one file lists them all: the children of the other
// threads are the first processes of calls (spawner threads), which their
// Process waits for, and processes started elsewhere in the program. The
// cost stays the same however many sessions (spawner threads) there are.
// The file stays open: each read makes the kernel list them afresh.
func ownChildren() []int {
	mainChildren.Lock()
	defer mainChildren.Unlock()
	if mainChildren.f == nil {
		f, err := os.Open("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
		if err != nil {
			return nil
		}
		mainChildren.f = f
	}
	data := mainChildren.data[:0]
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, 4096)
		}
		n, err := mainChildren.f.ReadAt(data[len(data):cap(data)], int64(len(data)))
		data = data[:len(data)+n]
		if err != nil || n == 0 {
			break
		}
	}
	mainChildren.data = data
	var pids []int
	for _, f := range bytes.Fields(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mainChildren is the open children file of the main thread.
var mainChildren struct {
	sync.Mutex
	f    *os.File
	data []byte
}

// parseStat extracts state, ppid and pgrp from /proc/<pid>/stat.
func parseStat(b []byte) (state byte, ppid, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 3 {
		return 0, 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	return f[0][0], ppid, pgrp, err1 == nil && err2 == nil
}
