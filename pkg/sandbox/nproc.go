package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// LimitUserProcesses is the fallback of SessionBounds.Processes where no
// pids controller is available. It lowers this process's RLIMIT_NPROC, soft and hard, to
// n (never raising it), so that every tool process inherits it: the kernel
// then refuses a fork or exec to a user that already has n processes. With
// a user of its own per session (Config.SessionUser) that bounds each
// session on its own; with one user for all sessions it bounds them
// together. Call it once at start, and only as root: root is exempt from
// the limit, so toolsvc's own threads are not counted, while the tools,
// which never run as root, are. It returns the hard limit in force.
func LimitUserProcesses(n uint64) (uint64, error) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err != nil {
		return 0, fmt.Errorf("sandbox: read RLIMIT_NPROC: %w", err)
	}
	if n == 0 || (cur.Max != unix.RLIM_INFINITY && cur.Max <= n) {
		return cur.Max, nil // unlimited by request, or already as low
	}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: min(cur.Cur, n), Max: n}); err != nil {
		return 0, fmt.Errorf("sandbox: set RLIMIT_NPROC to %d: %w", n, err)
	}
	return n, nil
}
