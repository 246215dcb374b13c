package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Open files toolsvc needs: a base for itself (listeners, connections,
// logs, MCP clients) and a share per session (its cgroup directories, the
// spawner's namespaces, output pipes and files of running calls).
const (
	baseOpenFiles       = 1024
	openFilesPerSession = 18
)

// raiseOpenFiles raises toolsvc's soft limit of open files (and the hard
// one when it must and may) to what maxSessions sessions need, or says
// why it cannot; with fit (--max-sessions left at its default) it lowers
// maxSessions to what the hard limit allows instead. Tool processes keep
// the soft limit toolsvc was started with. It returns the limit in force
// and the sessions it allows.
func raiseOpenFiles(maxSessions int, fit bool) (uint64, int, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if maxSessions <= 0 {
		return lim.Cur, maxSessions, nil
	}
	need := uint64(baseOpenFiles + openFilesPerSession*maxSessions)
	if lim.Cur >= need {
		return lim.Cur, maxSessions, nil
	}
	want := unix.Rlimit{Cur: need, Max: max(lim.Max, need)}
	// Prlimit on this process, not syscall.Setrlimit: the Go runtime then
	// still gives child processes the soft limit toolsvc started with.
	err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &want, nil)
	if err != nil && fit && lim.Max > baseOpenFiles+openFilesPerSession {
		fitted := int((lim.Max - baseOpenFiles) / openFilesPerSession)
		want = unix.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &want, nil); err == nil {
			return lim.Max, fitted, nil
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("--max-sessions %d needs about %d open files, and the limit is %d (hard %d) and cannot be raised (%v): raise it (ulimit -n, LimitNOFILE= of a systemd unit, --ulimit nofile= of a container) or lower --max-sessions",
			maxSessions, need, lim.Cur, lim.Max, err)
	}
	return need, maxSessions, nil
}
