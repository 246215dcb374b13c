// Package ccenv reads the environment variables of Claude Code that set
// the executor's limits, as aliases of toolwire's own flags and variables:
// BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS and
// CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY.
//
// Each value comes from the first of these that gives one: a flag on the
// command line (the caller's business), toolwire's own variable where it
// has one (TOOLWIRE_MAX_TOOL_CONCURRENCY), Claude Code's variable in the
// process's environment, the "env" object of the settings files, and the
// default. A value that is given but is not a positive whole number is an
// error naming the variable, whichever source it is in.
package ccenv

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The variables.
const (
	// DefaultTimeout is Claude Code's Bash timeout when a call gives none,
	// in milliseconds.
	DefaultTimeout = "BASH_DEFAULT_TIMEOUT_MS"
	// MaxTimeout is Claude Code's largest Bash timeout a call may ask for,
	// in milliseconds.
	MaxTimeout = "BASH_MAX_TIMEOUT_MS"
	// MaxConcurrency is Claude Code's cap on concurrency-safe calls that
	// run at once.
	MaxConcurrency = "CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY"
	// OwnMaxConcurrency is toolwire's own name for MaxConcurrency; it wins
	// over Claude Code's.
	OwnMaxConcurrency = "TOOLWIRE_MAX_TOOL_CONCURRENCY"
)

// Limits are the values the variables give; zero where none gives one.
type Limits struct {
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	MaxConcurrency int
}

// Read reads the variables from getenv, then from settingsEnv (the merged
// "env" object of the settings files; nil for none). An empty variable
// counts as unset, as in Claude Code.
func Read(getenv func(string) string, settingsEnv map[string]string) (Limits, error) {
	lookup := func(names ...string) (string, string) {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		for _, n := range names {
			if v := strings.TrimSpace(settingsEnv[n]); v != "" {
				return n + " (settings env)", v
			}
		}
		return "", ""
	}
	var l Limits
	for _, v := range []struct {
		names []string
		set   func(int)
	}{
		{[]string{DefaultTimeout}, func(n int) { l.DefaultTimeout = time.Duration(n) * time.Millisecond }},
		{[]string{MaxTimeout}, func(n int) { l.MaxTimeout = time.Duration(n) * time.Millisecond }},
		{[]string{OwnMaxConcurrency, MaxConcurrency}, func(n int) { l.MaxConcurrency = n }},
	} {
		name, s := lookup(v.names...)
		if name == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return Limits{}, fmt.Errorf("%s: %q is not a positive whole number", name, s)
		}
		v.set(n)
	}
	return l, nil
}

// Timeouts returns the default and largest Bash timeouts: those of the
// flags where given (flagDefault, flagMax non-zero), else those of l, else
// defDefault and defMax. The largest is never below the default: a default
// above it raises it, as Claude Code does.
func (l Limits) Timeouts(flagDefault, flagMax, defDefault, defMax time.Duration) (time.Duration, time.Duration) {
	d := cmp.Or(flagDefault, l.DefaultTimeout, defDefault)
	m := cmp.Or(flagMax, l.MaxTimeout, defMax)
	return d, max(d, m)
}

// Concurrency returns the cap on concurrent calls: flag's where given
// (non-zero), else l's, else def.
func (l Limits) Concurrency(flag, def int) int {
	return cmp.Or(flag, l.MaxConcurrency, def)
}
