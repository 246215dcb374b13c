package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time (user and system) spent so far by toolbench, by
// the children it has waited for (the floors' spawns), and by each process
// in pids with the children those have waited for (toolsvc and the
// commands it ran). Differences between two readings give the CPU a sample
// cost on every side of it.
func cpuTime(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return 0, fmt.Errorf("getrusage: %w", err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// procCPU reads utime, stime, cutime and cstime of process pid.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from the last ")". Field 3 (state) is the first after it; utime is
	// field 14.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 15 {
		return 0, fmt.Errorf("CPU time of process %d: unexpected /proc stat line %.80q", pid, s)
	}
	var ticks int64
	for _, field := range f[11:15] { // utime, stime, cutime, cstime
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
