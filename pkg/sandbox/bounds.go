package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// SessionBounds bound everything one runner's processes use together: every
// call of the session, background ones included, counted at once. They are
// enforced by the runner's own cgroup directory (pids and memory
// controllers, cgroup v1 or v2). Zero fields are unbounded.
type SessionBounds struct {
	// Processes is the number of tasks (processes and threads) the
	// session's processes may have at once. When a call reaches it, the
	// call is killed and its result says so.
	Processes int
	// Memory is the memory, in bytes, the session's processes may use
	// together (page cache of the files they write included). Past it the
	// kernel's OOM killer ends one of them, and the call's result says so.
	Memory int64
}

// Defaults of the session bounds.
const (
	// DefaultSessionTasks is the default of SessionBounds.Processes: plenty
	// for builds and test runs (threads count), few enough that a fork
	// bomb stops long before the executor does.
	DefaultSessionTasks = 2048
	// DefaultSessionMemory is the default of SessionBounds.Memory.
	DefaultSessionMemory = 2 << 30
)

// Reserve for the service itself: what the sessions together leave to it
// out of what its own cgroup allows, a base and a share per session (each
// session holds a spawner thread and goroutines of its own).
const (
	reserveTasks          = 256
	reserveTasksPerSess   = 2
	reserveMemory         = 256 << 20
	reserveMemoryPerSess  = 2 << 20
	minSessionTotalTasks  = 64
	minSessionTotalMemory = 64 << 20
)

// Capacity is what this process's own cgroups (or, without a limit there,
// the machine) allow it and everything it starts.
type Capacity struct {
	// Tasks and Memory are the limits in force; From says where each was
	// read.
	Tasks      int
	Memory     int64
	TasksFrom  string
	MemoryFrom string
}

// SessionPlan is how the sessions of this process are bounded: each on its
// own (PerSession) and all together (Total), which is the capacity less a
// reserve that keeps the service itself alive whatever the sessions do.
type SessionPlan struct {
	PerSession SessionBounds
	Total      SessionBounds
	Reserve    SessionBounds
	Capacity   Capacity
}

// PlanSessions sizes the bounds of up to maxSessions sessions that want
// per each: the sessions together get what the service's own cgroup
// allows less a reserve for the service (its threads and memory grow with
// the sessions), and no session gets more than all of them together. It
// fails, naming the limits, when the reserve leaves the sessions too
// little.
func PlanSessions(maxSessions int, per SessionBounds) (SessionPlan, error) {
	c := OwnCapacity()
	p := SessionPlan{Capacity: c}
	p.Reserve = SessionBounds{
		Processes: reserveTasks + reserveTasksPerSess*max(maxSessions, 0),
		Memory:    reserveMemory + reserveMemoryPerSess*int64(max(maxSessions, 0)),
	}
	p.Total = SessionBounds{Processes: c.Tasks - p.Reserve.Processes, Memory: c.Memory - p.Reserve.Memory}
	if p.Total.Processes < minSessionTotalTasks {
		return p, settingError(SettingSessionBounds, fmt.Errorf("sandbox: %s allows %d tasks; %d sessions leave the executor too few for its own threads (it keeps %d): allow more tasks or fewer sessions",
			c.TasksFrom, c.Tasks, maxSessions, p.Reserve.Processes))
	}
	if p.Total.Memory < minSessionTotalMemory {
		return p, settingError(SettingSessionBounds, fmt.Errorf("sandbox: %s allows %s of memory; %d sessions leave the executor too little for itself (it keeps %s): allow more memory or fewer sessions",
			c.MemoryFrom, FormatBytes(c.Memory), maxSessions, FormatBytes(p.Reserve.Memory)))
	}
	p.PerSession = per
	if per.Processes > p.Total.Processes {
		p.PerSession.Processes = p.Total.Processes
	}
	if per.Memory > p.Total.Memory {
		p.PerSession.Memory = p.Total.Memory
	}
	return p, nil
}

// FitSessions returns the most sessions, up to maxSessions, that the
// service's own cgroup (or the machine) can hold while its reserve leaves
// the sessions together at least half of what remains after the base
// reserve: for a service whose number of sessions was not chosen, such as
// a container with a small pids limit. It is at least 1.
func FitSessions(maxSessions int) int {
	if maxSessions <= 0 {
		return maxSessions
	}
	c := OwnCapacity()
	byTasks := (c.Tasks - reserveTasks) / 2 / reserveTasksPerSess
	byMemory := int((c.Memory - reserveMemory) / 2 / reserveMemoryPerSess)
	return max(1, min(maxSessions, byTasks, byMemory))
}

// OwnCapacity reads the task and memory limits of this process's own
// cgroups (the lowest of its directory and those above it), or without one
// the machine's.
func OwnCapacity() Capacity {
	c := Capacity{Tasks: hostTasks(), TasksFrom: "the machine", Memory: hostMemory(), MemoryFrom: "the machine"}
	m := findCgroups()
	lower := func(n int64, from string, tasks bool) {
		if n <= 0 {
			return
		}
		if tasks && n < int64(c.Tasks) {
			c.Tasks, c.TasksFrom = int(n), from
		}
		if !tasks && n < c.Memory {
			c.Memory, c.MemoryFrom = n, from
		}
	}
	for _, d := range ancestors(m.v1Pids, m.v1PidsRoot) {
		lower(readLimit(filepath.Join(d, "pids.max")), "the cgroup "+d, true)
	}
	if m.v1Memory != "" {
		lower(statValue(filepath.Join(m.v1Memory, "memory.stat"), "hierarchical_memory_limit"), "the cgroup "+m.v1Memory, false)
	}
	for _, d := range ancestors(m.unified, m.unifiedRoot) {
		lower(readLimit(filepath.Join(d, "pids.max")), "the cgroup "+d, true)
		lower(readLimit(filepath.Join(d, "memory.max")), "the cgroup "+d, false)
	}
	return c
}

// ancestors lists dir and the directories above it up to root (the mount
// point), nearest first.
func ancestors(dir, root string) []string {
	if dir == "" {
		return nil
	}
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == root || d == "/" || !strings.HasPrefix(d, root) {
			return out
		}
	}
}

// readLimit reads a cgroup limit file: a number, or "max" (0: none).
func readLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// statValue returns the value of key in a "key value" file, 0 if absent.
func statValue(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// hostTasks is the number of tasks the kernel allows at all.
func hostTasks() int {
	n := int64(1 << 22)
	for _, f := range []string{"/proc/sys/kernel/threads-max", "/proc/sys/kernel/pid_max"} {
		if v := readLimit(f); v > 0 && v < n {
			n = v
		}
	}
	return int(n)
}

// hostMemory is the machine's memory.
func hostMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 1 << 62
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// FormatBytes writes n in the largest binary unit it fills: "2 GiB",
// "512 MiB", "1.5 MiB", "100 bytes".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// ParseBytes parses a size: a number of bytes, or one with a binary unit
// K, M, G or T (KiB, MiB, ... and lower case accepted as well).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(lower, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want bytes, or a number with K, M, G or T", s)
	}
	return n * mult, nil
}

// sessionGroup is the cgroup directory, in each hierarchy, that holds the
// runner directories of this process: its limits are the sessions' total
// (SessionPlan.Total), so that all sessions together leave the service its
// reserve.
var sessionGroup struct {
	mu    sync.Mutex
	total SessionBounds
	dirs  map[string]string // own directory -> group directory ("" if it could not be made)
}

// UseSessionTotal sets the limits of the directory that holds every
// runner's cgroup: what all sessions of this process may use together.
// Runners made afterwards are put in it; zero fields leave it unbounded.
func UseSessionTotal(total SessionBounds) {
	sessionGroup.mu.Lock()
	defer sessionGroup.mu.Unlock()
	sessionGroup.total = total
	for own, g := range sessionGroup.dirs {
		if g != "" {
			applyGroupLimits(own, g, total)
		}
	}
}

// groupDir returns the directory for runner directories below own: the
// session group, made on first use, or own itself when it cannot be made.
func groupDir(own string, kind string) string {
	if own == "" {
		return ""
	}
	sessionGroup.mu.Lock()
	defer sessionGroup.mu.Unlock()
	if sessionGroup.dirs == nil {
		sessionGroup.dirs = map[string]string{}
	}
	g, ok := sessionGroup.dirs[own]
	if !ok {
		removeStale(own)
		g = filepath.Join(own, fmt.Sprintf("toolwire-%d", os.Getpid()))
		if err := os.Mkdir(g, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			g = ""
		} else {
			if kind == "unified" {
				ctrl, _ := os.ReadFile(filepath.Join(own, "cgroup.subtree_control"))
				for _, c := range []string{"pids", "memory"} {
					if bytes.Contains(ctrl, []byte(c)) {
						_ = os.WriteFile(filepath.Join(g, "cgroup.subtree_control"), []byte("+"+c), 0)
					}
				}
			}
			applyGroupLimits(own, g, sessionGroup.total)
		}
		sessionGroup.dirs[own] = g
	}
	if g == "" {
		return own
	}
	return g
}

// ReleaseSessionGroups removes the directories groupDir made, once their
// runners are gone: call it when the process's sessions are over (at
// exit), so that no empty cgroup of the process stays behind. A group that
// still holds a runner stays, for the next toolwire process to remove;
// runners made afterwards get a new group.
func ReleaseSessionGroups() {
	sessionGroup.mu.Lock()
	defer sessionGroup.mu.Unlock()
	for own, g := range sessionGroup.dirs {
		if g != "" {
			_ = unix.Rmdir(g)
		}
		delete(sessionGroup.dirs, own)
	}
}

// applyGroupLimits writes the sessions' total into a group directory, in
// whichever controller files it has.
func applyGroupLimits(own, g string, total SessionBounds) {
	set := func(name string, v int64) {
		val := "max"
		if v > 0 {
			val = strconv.FormatInt(v, 10)
		} else if strings.Contains(name, "limit_in_bytes") {
			val = "-1"
		}
		if _, err := os.Stat(filepath.Join(g, name)); err == nil {
			_ = os.WriteFile(filepath.Join(g, name), []byte(val), 0)
		}
	}
	set("pids.max", int64(total.Processes))
	set("memory.max", total.Memory)
	if total.Memory > 0 {
		set("memory.swap.max", 0)
	}
	set("memory.limit_in_bytes", total.Memory)
	_ = own
}

// ProcessBoundsAvailable reports whether runners can be given a process
// bound: a pids controller this process may make directories in.
func ProcessBoundsAvailable() bool {
	m := findCgroups()
	if m.v1Pids != "" {
		if g := groupDir(m.v1Pids, "pids"); g != m.v1Pids {
			return true
		}
	}
	if m.unified != "" {
		g := groupDir(m.unified, "unified")
		if _, err := os.Stat(filepath.Join(g, "pids.max")); err == nil && g != m.unified {
			return true
		}
	}
	return false
}
