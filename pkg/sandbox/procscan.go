package sandbox

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// procInfo is what /proc/<pid>/status says about a process's identity.
type procInfo struct {
	pid    int
	state  byte   // 'R', 'S', 'Z', ...
	uids   [4]int // real, effective, saved, file system
	gids   [4]int
	groups []int
}

// ids returns every user and group id the process holds.
func (pi procInfo) ids() []int {
	return append(append(pi.uids[:], pi.gids[:]...), pi.groups...)
}

// hasUID reports whether any of the process's user ids is uid.
func (pi procInfo) hasUID(uid int) bool { return slices.Contains(pi.uids[:], uid) }

// hasGroup reports whether gid is one of the process's group ids,
// supplementary ones included.
func (pi procInfo) hasGroup(gid int) bool {
	return slices.Contains(pi.gids[:], gid) || slices.Contains(pi.groups, gid)
}

// readProcInfo reads /proc/<pid>/status. The kernel shows the ids of
// zombies too, so a zombie is found by the same ids as the process was.
func readProcInfo(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procInfo{}, false
	}
	pi := procInfo{pid: pid}
	var haveUID, haveGID bool
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(key) {
		case "State":
			if v := bytes.TrimSpace(val); len(v) > 0 {
				pi.state = v[0]
			}
		case "Uid":
			haveUID = parseIDs(val, pi.uids[:])
		case "Gid":
			haveGID = parseIDs(val, pi.gids[:])
		case "Groups":
			for _, f := range strings.Fields(string(val)) {
				if id, err := strconv.Atoi(f); err == nil {
					pi.groups = append(pi.groups, id)
				}
			}
		}
	}
	return pi, haveUID && haveGID
}

func parseIDs(val []byte, out []int) bool {
	f := strings.Fields(string(val))
	if len(f) != len(out) {
		return false
	}
	for i := range f {
		id, err := strconv.Atoi(f[i])
		if err != nil {
			return false
		}
		out[i] = id
	}
	return true
}

// scanProcs calls fn for every process of the machine (of toolsvc's pid
// namespace) whose status can be read.
func scanProcs(fn func(procInfo)) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self {
			continue
		}
		if pi, ok := readProcInfo(pid); ok {
			fn(pi)
		}
	}
}

// killMatching sends SIGKILL to every live process that match accepts and
// returns how many it found. A pid is pinned with a pidfd before its ids are
// read, so that a pid reused between the scan and the signal is not hit.
func killMatching(match func(procInfo) bool) int {
	var found int
	scanProcs(func(pi procInfo) {
		if pi.state == 'Z' || !match(pi) {
			return
		}
		found++
		fd, err := unix.PidfdOpen(pi.pid, 0)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				return
			}
			// No pidfds (old kernel, or a seccomp profile without
			// them): the plain signal, with the small reuse race.
			unix.Kill(pi.pid, unix.SIGKILL)
			return
		}
		defer unix.Close(fd)
		if again, ok := readProcInfo(pi.pid); ok && match(again) {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
	})
	return found
}

// killAll kills every process match accepts, again and again until none is
// left alive (a process may fork while the scan runs) or timeout passes. It
// reports whether none is left.
//
// After a scan that found processes, one empty scan is not proof: a child
// whose fork completed while the scan went by may not be listed yet, so it
// then takes two empty scans a millisecond apart. A first scan that finds
// nothing ends at once (no process was left that could fork), which keeps
// the common case, a call that left nothing behind, to one scan, unless
// killed says processes were killed just before (by a signal to their
// group or one pass of killMatching): one of them may have been forking.
func killAll(match func(procInfo) bool, timeout time.Duration, killed bool) bool {
	deadline := time.Now().Add(timeout)
	delay := 50 * time.Microsecond
	for empty, found := 0, killed; ; {
		if killMatching(match) > 0 {
			empty, found = 0, true
		} else {
			empty++
			delay = time.Millisecond
		}
		if empty == 2 || (empty == 1 && !found) {
			break
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
	return true
}
