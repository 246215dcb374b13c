package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SessionsFigure is the load figure of many sessions: n sessions of one
// toolsvc, each sending Reads of the 1 KiB file back to back, all at once.
type SessionsFigure struct {
	Sandbox  string  `json:"sandbox"`
	Sessions int     `json:"sessions"`
	Calls    int     `json:"calls"`
	Seconds  float64 `json:"seconds"`
	// CallsPerSecond is Calls over the wall time from the first call sent
	// to the last Result received.
	CallsPerSecond float64 `json:"calls_per_second"`
	// ExecutorCPUms is toolsvc's own CPU time (user and system, from
	// /proc/PID/stat) over that time, per call.
	ExecutorCPUms float64 `json:"executor_cpu_ms_per_call"`
	// TotalCPUms adds toolbench's CPU, the client side, per call.
	TotalCPUms float64 `json:"total_cpu_ms_per_call"`
}

// sessionsGoal is issue 20's goal for the executor CPU per Read call with
// 100 sessions busy.
const sessionsGoal = 0.1

// parseSessions reads --sessions: counts of sessions, comma-separated.
func parseSessions(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--sessions: %q is not a positive count", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// sessionsFigure opens n sessions on svc, then lets each send Reads of file
// back to back until calls Reads were sent in all, and measures the calls'
// rate and CPU cost. The sessions are closed before it returns.
func sessionsFigure(ctx context.Context, svc *toolsvcProc, file string, n, calls int) (SessionsFigure, error) {
	fig := SessionsFigure{Sandbox: svc.sandbox, Sessions: n}
	sessions := make([]*session, 0, n)
	defer func() {
		for _, s := range sessions {
			_ = s.close()
		}
	}()
	for range n {
		s, err := openSession(ctx, svc)
		if err != nil {
			return fig, fmt.Errorf("open session %d of %d: %w", len(sessions)+1, n, err)
		}
		sessions = append(sessions, s)
	}
	samplers := make([]sampler, n)
	for i, s := range sessions {
		samplers[i] = readSample(s, file)
		if _, _, err := samplers[i](ctx); err != nil { // warm up every session
			return fig, err
		}
	}
	pid := svc.cmd.Process.Pid
	exec0, err := procCPU(pid)
	if err != nil {
		return fig, err
	}
	all0, err := cpuTime([]int{pid})
	if err != nil {
		return fig, err
	}
	var mu sync.Mutex
	left := calls
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for _, sample := range samplers {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 || len(errs) > 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				if _, _, err := sample(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return fig, err
	}
	exec1, err := procCPU(pid)
	if err != nil {
		return fig, err
	}
	all1, err := cpuTime([]int{pid})
	if err != nil {
		return fig, err
	}
	fig.Calls, fig.Seconds = calls, wall.Seconds()
	fig.CallsPerSecond = float64(calls) / wall.Seconds()
	fig.ExecutorCPUms = float64(exec1-exec0) / float64(time.Millisecond) / float64(calls)
	fig.TotalCPUms = float64(all1-all0) / float64(time.Millisecond) / float64(calls)
	return fig, nil
}
