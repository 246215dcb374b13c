package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupMounts are the hierarchies the service can use, with the service's
// own directory in each.
type cgroupMounts struct {
	unified  string // own cgroup v2 directory, "" if none
	v1Pids   string // own cgroup v1 pids directory, "" if none
	v1Memory string // own cgroup v1 memory directory, "" if none
	// Mount points of the hierarchies above.
	unifiedRoot, v1PidsRoot, v1MemoryRoot string
}

// findCgroups locates the service's own cgroup directories from
// /proc/self/mountinfo and /proc/self/cgroup.
func findCgroups() cgroupMounts {
	var m cgroupMounts
	b, _ := os.ReadFile("/proc/self/cgroup")
	own := cgroupPaths(b)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 || len(fields) < 5 {
			continue
		}
		root, point, fstype, opts := fields[3], fields[4], fields[sep+1], fields[sep+3]
		dir := func(p string) string {
			rel := strings.TrimPrefix(p, root)
			if root == "/" {
				rel = p
			}
			return filepath.Join(point, rel)
		}
		switch fstype {
		case "cgroup2":
			if p, ok := own[""]; ok && m.unified == "" {
				m.unified, m.unifiedRoot = dir(p), point
			}
		case "cgroup":
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case "pids":
					if p, ok := own["pids"]; ok && m.v1Pids == "" {
						m.v1Pids, m.v1PidsRoot = dir(p), point
					}
				case "memory":
					if p, ok := own["memory"]; ok && m.v1Memory == "" {
						m.v1Memory, m.v1MemoryRoot = dir(p), point
					}
				}
			}
		}
	}
	return m
}

// cgroupPaths reads a /proc/PID/cgroup listing: the path of each
// controller, "" for cgroup v2.
func cgroupPaths(listing []byte) map[string]string {
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	return paths
}

// runnerCgroups are a runner's own directories, one per usable hierarchy.
// They carry the session's bounds; each call gets directories below them.
type runnerCgroups struct {
	name     string // toolwire-<pid>-<n>, the marker in /proc/<pid>/cgroup
	unified  string // kill via cgroup.kill; "" when unavailable
	v2Memory bool   // memory controller enabled below unified (per-call limit)
	v2Pids   bool   // pids controller enabled below unified (per-call limit)
	v1Pids   string
	v1Memory string
	// v1Home are the tasks files of the service's own directories in the
	// hierarchies of v1Pids and v1Memory, for those that are set and in
	// that order: after forking a call's process from inside the call's
	// directories, the spawner thread goes back to them.
	v1Home []*os.File
	// bound: the session bounds the directories enforce (zero fields:
	// not enforced, for want of a controller or because none was asked).
	bound SessionBounds
	seq   atomic.Uint64

	spareMu  sync.Mutex    // guards the fields below
	spares   []*callCgroup // empty call directories ready for the next calls
	inUse    int           // call directories handed out and not back yet
	spareCap int           // how many spares to keep (see maxSpareCalls)
	trim     *time.Timer   // lowers spareCap again once a burst is over
	closed   bool
}

// Spare call directories. Starting a process in a cgroup it is the first
// to use, and removing that cgroup afterwards, costs more than the rest of
// a short call's sandboxing together (0.5–1 ms here); a cgroup whose
// processes are all gone can take the next call as it is, since its
// limits are the same. A runner keeps maxSpareCalls; after a burst of
// calls at once it keeps as many as the burst had (up to maxBurstSpares),
// so that the next burst makes and removes none, until burstSpareIdle
// passes without a call ending.
const (
	maxSpareCalls  = 2
	maxBurstSpares = 64
	burstSpareIdle = 10 * time.Second
)

var runnerSeq atomic.Uint64

// cgroupsDisabled makes new runners use no cgroup (for tests of the
// fallback).
var cgroupsDisabled atomic.Bool

// newRunnerCgroups creates the runner's directories where the hierarchy
// allows it, in this process's session group (see UseSessionTotal), and
// applies the session's bounds to them; what fails is returned as notes,
// not errors, because the caller degrades to process groups and rlimits.
func newRunnerCgroups(limits Limits, session SessionBounds) (*runnerCgroups, []string) {
	m := findCgroups()
	rc := &runnerCgroups{name: fmt.Sprintf("toolwire-%d-%d", os.Getpid(), runnerSeq.Add(1)), spareCap: maxSpareCalls}
	var notes []string
	mk := func(own, kind, what string) string {
		if own == "" {
			notes = append(notes, what+": hierarchy not mounted")
			return ""
		}
		d := filepath.Join(groupDir(own, kind), rc.name)
		if err := os.Mkdir(d, 0o755); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", what, err))
			return ""
		}
		return d
	}
	// A v1 hierarchy is used only with a way back for the spawner thread.
	mkV1 := func(own, kind, what string) string {
		if own == "" {
			return mk(own, kind, what)
		}
		home, err := os.OpenFile(filepath.Join(own, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", what, err))
			return ""
		}
		d := mk(own, kind, what)
		if d == "" {
			home.Close()
			return ""
		}
		rc.v1Home = append(rc.v1Home, home)
		return d
	}
	rc.unified = mk(m.unified, "unified", "cgroup v2")
	if rc.unified != "" {
		if _, err := os.Stat(filepath.Join(rc.unified, "cgroup.kill")); err != nil {
			notes = append(notes, "cgroup v2: no cgroup.kill (kernel older than 5.14)")
			os.Remove(rc.unified)
			rc.unified = ""
		}
	}
	if rc.unified != "" {
		// The session's bounds, where the group passes the controllers on.
		if session.Processes > 0 && writeFile(rc.unified, "pids.max", strconv.Itoa(session.Processes)) == nil {
			rc.bound.Processes = session.Processes
		}
		if session.Memory > 0 && writeFile(rc.unified, "memory.max", strconv.FormatInt(session.Memory, 10)) == nil {
			writeFile(rc.unified, "memory.swap.max", "0")
			rc.bound.Memory = session.Memory
		}
		ctrl, _ := os.ReadFile(filepath.Join(rc.unified, "cgroup.controllers"))
		enable := func(c string) bool {
			if !bytes.Contains(ctrl, []byte(c)) {
				return false
			}
			return os.WriteFile(filepath.Join(rc.unified, "cgroup.subtree_control"), []byte("+"+c), 0) == nil
		}
		if limits.Memory > 0 || rc.bound.Memory > 0 {
			rc.v2Memory = enable("memory")
		}
		if limits.Processes > 0 || rc.bound.Processes > 0 {
			rc.v2Pids = enable("pids")
		}
	}
	if (limits.Processes > 0 && !rc.v2Pids) || (session.Processes > 0 && rc.bound.Processes == 0) {
		if rc.v1Pids = mkV1(m.v1Pids, "pids", "cgroup v1 pids"); rc.v1Pids != "" && session.Processes > 0 {
			if err := writeFile(rc.v1Pids, "pids.max", strconv.Itoa(session.Processes)); err != nil {
				notes = append(notes, err.Error())
			} else {
				rc.bound.Processes = session.Processes
			}
		}
	}
	if (limits.Memory > 0 && !rc.v2Memory) || (session.Memory > 0 && rc.bound.Memory == 0) {
		if rc.v1Memory = mkV1(m.v1Memory, "memory", "cgroup v1 memory"); rc.v1Memory != "" && session.Memory > 0 {
			v := strconv.FormatInt(session.Memory, 10)
			if err := writeFile(rc.v1Memory, "memory.limit_in_bytes", v); err != nil {
				notes = append(notes, err.Error())
			} else {
				writeFile(rc.v1Memory, "memory.memsw.limit_in_bytes", v) // needs swap accounting
				rc.bound.Memory = session.Memory
			}
		}
	}
	return rc, notes
}

// removeStale removes the directories of runners of toolwire processes
// that died without cleaning up (a session group "toolwire-<pid>" and the
// runner directories "toolwire-<pid>-<n>" in it or, from older versions,
// right in parent), killing what still runs in them.
func removeStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "toolwire-") {
			continue
		}
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, "toolwire-"), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue // not ours to judge, or its owner still runs
		}
		removeTree(filepath.Join(parent, name))
	}
}

// removeTree kills what runs in a cgroup directory and below and removes
// them, deepest first.
func removeTree(dir string) {
	subs, _ := os.ReadDir(dir)
	for _, c := range subs {
		if c.IsDir() {
			removeTree(filepath.Join(dir, c.Name()))
		}
	}
	if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) != nil {
		killListed(dir)
	}
	removeDir(dir)
}

// remove deletes the runner's (by now empty) directories.
func (rc *runnerCgroups) remove() {
	rc.spareMu.Lock()
	spares := rc.spares
	rc.spares = nil
	rc.closed = true
	if rc.trim != nil {
		rc.trim.Stop()
	}
	rc.spareMu.Unlock()
	for _, cc := range spares {
		cc.remove()
	}
	for _, d := range []string{rc.unified, rc.v1Pids, rc.v1Memory} {
		if d != "" {
			removeDir(d)
		}
	}
	for _, f := range rc.v1Home {
		f.Close()
	}
}

// callCgroup is one call's set of directories. Calls of a runner may use
// it one after another; its file descriptors stay open until it is
// removed.
type callCgroup struct {
	key     string // <runner name>/c<n>
	unified string
	v1      []string
	dirFD   int // unified directory, for CLONE_INTO_CGROUP; -1 if none
	// freezeFD is its cgroup.freeze, opened ahead so that an abort is one
	// write; -1 if none. (The kill that follows is not in a hurry.)
	freezeFD int
	// v1Tasks are the tasks files of the v1 directories, in the order of
	// runnerCgroups.v1Home: the spawner thread writes its id to them to
	// fork the call's first process from inside them.
	v1Tasks  []*os.File
	v1Pids   string // the v1 pids directory among v1, "" if none
	v1Memory string // the v1 memory directory among v1, "" if none
	// Files read at the end of every call of the directory, opened with
	// it: reading an open cgroup file again costs a few microseconds,
	// opening one tens. -1 where the file does not exist.
	populatedFD int // v2 cgroup.events, or v1 cgroup.procs of v1[0]
	pidsFD      int // pids.events (v2: pids.events.local where there is one)
	oomFD       int // v2 memory.events, or v1 memory.oom_control
	// killed: cgroup.kill (or cgroup.freeze) was written. Such a directory
	// is not reused: a process cloned into it later (CLONE_INTO_CGROUP) can
	// be killed at birth, as the kernel compares kill counts of parent and
	// target, or be born frozen.
	killed atomic.Bool
}

// newCall returns directories for a call, with the memory and pids limits
// applied: a spare one, or new ones.
func (rc *runnerCgroups) newCall(limits Limits) (*callCgroup, error) {
	rc.spareMu.Lock()
	rc.inUse++
	rc.spareCap = max(rc.spareCap, min(rc.inUse, maxBurstSpares))
	if n := len(rc.spares); n > 0 {
		cc := rc.spares[n-1]
		rc.spares = rc.spares[:n-1]
		rc.spareMu.Unlock()
		return cc, nil
	}
	rc.spareMu.Unlock()
	return rc.makeCall(limits)
}

// prepare makes directories for the next call ahead of it, unless a spare
// is ready or they cannot be made (the call will then say why).
func (rc *runnerCgroups) prepare(limits Limits) {
	rc.spareMu.Lock()
	ready := len(rc.spares) > 0
	rc.spareMu.Unlock()
	if ready {
		return
	}
	if cc, err := rc.makeCall(limits); err == nil {
		rc.spareMu.Lock()
		cc = rc.keepLocked(cc)
		rc.spareMu.Unlock()
		if cc != nil {
			cc.remove()
		}
	}
}

// recycle takes back the directories of a call that has ended: it keeps
// them for a later call if nothing is left in them and they were never
// killed, or removes them.
func (rc *runnerCgroups) recycle(cc *callCgroup) {
	rc.spareMu.Lock()
	rc.inUse--
	cc = rc.keepLocked(cc)
	if rc.spareCap > maxSpareCalls && !rc.closed {
		if rc.trim == nil {
			rc.trim = time.AfterFunc(burstSpareIdle, rc.trimSpares)
		} else {
			rc.trim.Reset(burstSpareIdle)
		}
	}
	rc.spareMu.Unlock()
	if cc != nil {
		cc.remove()
	}
}

// discard takes back the directories of a call that did not start.
func (rc *runnerCgroups) discard(cc *callCgroup) {
	rc.spareMu.Lock()
	rc.inUse--
	rc.spareMu.Unlock()
	cc.remove()
}

// keepLocked adds cc to the spares if it may be used again and there is
// room; it returns cc when it did not.
func (rc *runnerCgroups) keepLocked(cc *callCgroup) *callCgroup {
	if !rc.closed && len(rc.spares) < rc.spareCap && !cc.killed.Load() && cc.empty() && cc.hits() == (limitHits{}) {
		rc.spares = append(rc.spares, cc)
		return nil
	}
	return cc
}

// trimSpares ends a burst: the runner keeps maxSpareCalls spares again.
func (rc *runnerCgroups) trimSpares() {
	rc.spareMu.Lock()
	rc.spareCap = maxSpareCalls
	var extra []*callCgroup
	if n := len(rc.spares); n > maxSpareCalls && !rc.closed {
		extra = slices.Clone(rc.spares[maxSpareCalls:])
		clear(rc.spares[maxSpareCalls:])
		rc.spares = rc.spares[:maxSpareCalls]
	}
	rc.spareMu.Unlock()
	for _, cc := range extra {
		cc.remove()
	}
}

// makeCall creates a call's directories and applies the memory and pids
// limits.
func (rc *runnerCgroups) makeCall(limits Limits) (*callCgroup, error) {
	n := fmt.Sprintf("c%d", rc.seq.Add(1))
	cc := &callCgroup{key: rc.name + "/" + n, dirFD: -1, freezeFD: -1, populatedFD: -1, pidsFD: -1, oomFD: -1}
	fail := func(err error) (*callCgroup, error) {
		cc.remove()
		return nil, err
	}
	if rc.unified != "" {
		d := filepath.Join(rc.unified, n)
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(fmt.Errorf("sandbox: create cgroup: %w", err))
		}
		cc.unified = d
		if rc.v2Memory && limits.Memory > 0 {
			if err := writeFile(d, "memory.max", strconv.FormatInt(limits.Memory, 10)); err != nil {
				return fail(err)
			}
			writeFile(d, "memory.swap.max", "0")
		}
		if rc.v2Pids && limits.Processes > 0 {
			if err := writeFile(d, "pids.max", strconv.Itoa(limits.Processes)); err != nil {
				return fail(err)
			}
		}
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("sandbox: open cgroup: %w", err))
		}
		cc.dirFD = fd
		// Opening a cgroup file costs tens of microseconds here; an abort
		// should not wait for it.
		if fd, err := unix.Openat(cc.dirFD, "cgroup.freeze", unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
			cc.freezeFD = fd
		}
	}
	v1 := func(parent string, dir *string, file, value string, extra ...string) error {
		if parent == "" {
			return nil
		}
		d := filepath.Join(parent, n)
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("sandbox: create cgroup: %w", err)
		}
		cc.v1 = append(cc.v1, d)
		*dir = d
		if value != "0" { // no limit of the call's own: the session's holds
			if err := writeFile(d, file, value); err != nil {
				return err
			}
			for _, f := range extra {
				writeFile(d, f, value) // best effort (memsw needs swap accounting)
			}
		}
		tasks, err := os.OpenFile(filepath.Join(d, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open cgroup: %w", err)
		}
		cc.v1Tasks = append(cc.v1Tasks, tasks)
		return nil
	}
	if err := v1(rc.v1Pids, &cc.v1Pids, "pids.max", strconv.Itoa(limits.Processes)); err != nil {
		return fail(err)
	}
	if err := v1(rc.v1Memory, &cc.v1Memory, "memory.limit_in_bytes", strconv.FormatInt(limits.Memory, 10), "memory.memsw.limit_in_bytes"); err != nil {
		return fail(err)
	}
	if cc.unified != "" {
		cc.populatedFD = openCounter(cc.unified, "cgroup.events")
		cc.pidsFD = openCounter(cc.unified, "pids.events.local", "pids.events")
		cc.oomFD = openCounter(cc.unified, "memory.events")
	} else if len(cc.v1) > 0 {
		cc.populatedFD = openCounter(cc.v1[0], "cgroup.procs")
	}
	if cc.pidsFD < 0 && cc.v1Pids != "" {
		cc.pidsFD = openCounter(cc.v1Pids, "pids.events")
	}
	if cc.oomFD < 0 && cc.v1Memory != "" {
		cc.oomFD = openCounter(cc.v1Memory, "memory.oom_control")
	}
	return cc, nil
}

// openCounter opens the first of names in dir that exists, to be read
// again and again (readCounter); -1 if none does.
func openCounter(dir string, names ...string) int {
	for _, n := range names {
		if fd, err := unix.Open(filepath.Join(dir, n), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			return fd
		}
	}
	return -1
}

// readCounter reads a cgroup file through fd from its start into buf: each
// read from offset 0 shows the file's present content.
func readCounter(fd int, buf []byte) ([]byte, error) {
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// counterValue returns the number after key in the "key value" lines of
// the cgroup file open at fd; 0 if it cannot tell.
func counterValue(fd int, key string) int64 {
	if fd < 0 {
		return 0
	}
	var buf [1024]byte
	b, err := readCounter(fd, buf[:])
	if err != nil {
		return 0
	}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		if k, v, ok := bytes.Cut(line, []byte(" ")); ok && string(k) == key {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// closeFDs releases the directory's file descriptors.
func (cc *callCgroup) closeFDs() {
	if cc.dirFD >= 0 {
		unix.Close(cc.dirFD)
		cc.dirFD = -1
	}
	if cc.freezeFD >= 0 {
		unix.Close(cc.freezeFD)
		cc.freezeFD = -1
	}
	for _, f := range cc.v1Tasks {
		f.Close()
	}
	cc.v1Tasks = nil
	for _, fd := range []*int{&cc.populatedFD, &cc.pidsFD, &cc.oomFD} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// end kills what is left of the call, if anything, and waits until nothing
// is. It reports false when the call has no directory that can do so.
func (cc *callCgroup) end() bool {
	if cc.unified == "" && len(cc.v1) == 0 {
		return false
	}
	// An empty call stays empty: nothing is left that could fork into it.
	if !cc.empty() {
		cc.kill()
		cc.waitEmpty()
	}
	return true
}

// kill sends SIGKILL to every process of the call. It reports false when
// the call has no directory that can do so.
func (cc *callCgroup) kill() bool {
	if cc.unified != "" {
		cc.killed.Store(true)
		return writeFile(cc.unified, "cgroup.kill", "1") == nil
	}
	if len(cc.v1) > 0 {
		killListed(cc.v1[0])
		return true
	}
	return false
}

// freeze stops every process of the call where it is: none runs another
// instruction of its own until the cgroup is thawed or killed (SIGKILL
// ends frozen processes too). Freezing asks less of the machine than
// killing: the processes stop, while a kill runs each one's exit (freeing
// its memory, closing its files) on some CPU at once. It reports false
// when the call's directory cannot be frozen; the directory is not reused
// once it was.
func (cc *callCgroup) freeze() bool {
	if cc.freezeFD < 0 {
		return false
	}
	cc.killed.Store(true)
	_, err := unix.Write(cc.freezeFD, []byte("1"))
	return err == nil
}

// waitEmpty waits until no process is left in the call, killing again
// until then (needed where only v1 listings are available).
func (cc *callCgroup) waitEmpty() {
	delay := 50 * time.Microsecond
	for i := 0; ; i++ {
		if cc.empty() {
			return
		}
		if len(cc.v1) > 0 && cc.unified == "" {
			killListed(cc.v1[0])
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

func (cc *callCgroup) empty() bool {
	if cc.unified == "" && len(cc.v1) == 0 {
		return true
	}
	var buf [512]byte
	b, err := readCounter(cc.populatedFD, buf[:])
	switch {
	case err != nil:
		return true
	case cc.unified != "":
		return bytes.Contains(b, []byte("populated 0"))
	default:
		return len(bytes.TrimSpace(b)) == 0
	}
}

// remove closes the call's file descriptors and deletes its directories.
func (cc *callCgroup) remove() {
	cc.closeFDs()
	if cc.unified != "" {
		removeDir(cc.unified)
	}
	for _, d := range cc.v1 {
		removeDir(d)
	}
}

// killListed sends SIGKILL to every process listed in a v1 directory.
func killListed(dir string) {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		// The service itself is listed while a spawner thread forks a
		// call's process from inside the call's directory.
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 && pid != os.Getpid() {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// removeDir removes a cgroup directory, retrying while the kernel still
// counts exiting tasks in it.
func removeDir(d string) {
	delay := 100 * time.Microsecond
	for i := 0; i < 40; i++ {
		err := unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
	cgroupLeftovers.Add(1)
}

// cgroupLeftovers counts directories that could not be removed.
var cgroupLeftovers atomic.Int64

func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("sandbox: cgroup %s: %w", name, err)
	}
	return nil
}

// limitHits say which limits a call's processes ran into.
type limitHits struct {
	processes bool // a fork failed at a pids limit
	memory    bool // the OOM killer ended a process
}

// hits reads the call's counters. They only grow, and a directory with a
// count is not used again (see recycle), so any count is this call's.
func (cc *callCgroup) hits() limitHits {
	return limitHits{
		processes: counterValue(cc.pidsFD, "max") > 0,
		memory:    counterValue(cc.oomFD, "oom_kill") > 0,
	}
}

// holdsAll reports whether every process the runner starts lands in its
// directories: a v2 directory (CLONE_INTO_CGROUP) or a v1 one (forked
// from inside it).
func (rc *runnerCgroups) holdsAll() bool {
	return rc.unified != "" || rc.v1Pids != "" || rc.v1Memory != ""
}

// killTree kills every process in the runner's directories and below and
// waits until none is left or timeout passes; it reports whether none is.
func (rc *runnerCgroups) killTree(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	delay := 50 * time.Microsecond
	for {
		left := false
		if rc.unified != "" {
			b, err := os.ReadFile(filepath.Join(rc.unified, "cgroup.events"))
			if err == nil && !bytes.Contains(b, []byte("populated 0")) {
				left = true
				writeFile(rc.unified, "cgroup.kill", "1")
			}
		} else {
			dir := rc.v1Pids
			if dir == "" {
				dir = rc.v1Memory
			}
			subs, _ := os.ReadDir(dir)
			for _, c := range subs {
				if !c.IsDir() {
					continue
				}
				d := filepath.Join(dir, c.Name())
				if b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); len(bytes.TrimSpace(b)) > 0 {
					left = true
					killListed(d)
				}
			}
		}
		if !left {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}
