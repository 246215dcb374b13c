package sandbox

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// DisableCgroups makes runners created until the end of t use no cgroup,
// as on a host or container without a writable hierarchy.
func DisableCgroups(t testing.TB) {
	t.Helper()
	cgroupsDisabled.Store(true)
	t.Cleanup(func() { cgroupsDisabled.Store(false) })
}

// SpawnerFiles lists the descriptors open in the file table of r's
// spawner thread.
func SpawnerFiles(r *Runner) ([]os.DirEntry, error) {
	return os.ReadDir(fmt.Sprintf("/proc/self/task/%d/fd", r.sp.tid))
}

// ShareSpawnerFiles makes runners created until the end of t start their
// processes from the service's file table, as where the kernel or a
// seccomp profile refuses the spawner a table of its own.
func ShareSpawnerFiles(t testing.TB) {
	t.Helper()
	sharedFilesOnly.Store(true)
	t.Cleanup(func() { sharedFilesOnly.Store(false) })
}

// CallDirs reports the spare call directories r keeps and how many it has
// made in all; ok is false when r has no cgroup.
func CallDirs(r *Runner) (spares int, made uint64, ok bool) {
	if r.cg == nil {
		return 0, 0, false
	}
	r.cg.spareMu.Lock()
	defer r.cg.spareMu.Unlock()
	return len(r.cg.spares), r.cg.seq.Load(), true
}

// EndBurst does at once what burstSpareIdle without calls does.
func EndBurst(r *Runner) { r.cg.trimSpares() }

// SpawnerCgroups returns the cgroup listing of r's spawner thread, as
// /proc shows it.
func SpawnerCgroups(r *Runner) ([]byte, error) {
	return os.ReadFile(fmt.Sprintf("/proc/self/task/%d/cgroup", r.sp.tid))
}

// CgroupPaths reads a /proc/PID/cgroup listing: the path of each
// controller, "" for cgroup v2.
var CgroupPaths = cgroupPaths

// DelayAbortKill sets how long Abort waits between freezing a call and
// killing it, for the rest of the test.
func DelayAbortKill(t testing.TB, d time.Duration) {
	old := abortKillDelay
	abortKillDelay = d
	t.Cleanup(func() { abortKillDelay = old })
}

// CallCgroupDir returns the cgroup v2 directory of p's call, "" if it has
// none.
func CallCgroupDir(p *Process) string {
	if p.cg == nil {
		return ""
	}
	return p.cg.unified
}

// WatchingChildren reports whether the orphan reaper watches SIGCHLD.
func WatchingChildren() bool {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	return reaper.watching
}

// SetWatchLinger sets how long SIGCHLD stays watched after the last
// orphan was seen, for the rest of the test.
func SetWatchLinger(t testing.TB, d time.Duration) {
	reaper.mu.Lock()
	old := watchLinger
	watchLinger = d
	reaper.mu.Unlock()
	t.Cleanup(func() {
		reaper.mu.Lock()
		watchLinger = old
		reaper.mu.Unlock()
	})
}
