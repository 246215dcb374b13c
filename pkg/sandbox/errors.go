package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("sandbox: runner closed")

// PolicyError is a start the sandbox refused because of its policy. Msg
// names what was refused and why, in words fit for the model.
type PolicyError struct {
	Msg string
}

// Error returns the message.
func (e *PolicyError) Error() string { return e.Msg }

func denied(format string, args ...any) error {
	return &PolicyError{Msg: fmt.Sprintf(format, args...)}
}

// Setting names a part of the sandbox's configuration. An error that a
// different value of one setting would fix carries it (SettingError), so
// that a command can name the flag that sets it: the package itself knows
// no flags.
type Setting string

// Settings errors are about.
const (
	// SettingBackend is Config.Backend: Landlock, or no file confinement.
	SettingBackend Setting = "backend"
	// SettingNetwork is Config.Network.
	SettingNetwork Setting = "network"
	// SettingUser is Config.RunAsUser: the one user every tool runs as,
	// who must exist and be able to use the workspace.
	SettingUser Setting = "user"
	// SettingSessionUsers is giving each session a user of its own
	// (Config.SessionUser), which needs root and a few kernel features.
	SettingSessionUsers Setting = "session users"
	// SettingSessionUIDs is the range session users come from (UIDRange).
	SettingSessionUIDs Setting = "session uids"
	// SettingSessionWorkspace is a workspace a session user cannot use:
	// one root owns, or under a directory others cannot search.
	SettingSessionWorkspace Setting = "session workspace"
	// SettingPaths is Config.ReadOnlyPaths and Config.ReadWritePaths.
	SettingPaths Setting = "paths"
	// SettingLimits is Config.Limits.
	SettingLimits Setting = "limits"
	// SettingSessionBounds is the number of sessions against what the
	// service's own cgroup allows (PlanSessions).
	SettingSessionBounds Setting = "session bounds"
)

// SettingError is an error that a different value of Setting fixes. Its
// message is Err's, in words that name no flag or field.
type SettingError struct {
	Setting Setting
	Err     error
}

// Error returns Err's message.
func (e *SettingError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *SettingError) Unwrap() error { return e.Err }

// settingError returns err tagged with s; nil stays nil.
func settingError(s Setting, err error) error {
	if err == nil {
		return nil
	}
	return &SettingError{Setting: s, Err: err}
}

// SettingsOf returns the settings of the SettingErrors in err's tree (see
// errors.As), each once, in the order they appear.
func SettingsOf(err error) []Setting {
	var out []Setting
	seen := map[Setting]bool{}
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if se, ok := err.(*SettingError); ok && !seen[se.Setting] {
			seen[se.Setting] = true
			out = append(out, se.Setting)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// policyError lists everything a configured policy needs and does not get.
type policyError []error

func (e policyError) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return "sandbox: cannot enforce the configured policy: " + strings.Join(msgs, "; ")
}

func (e policyError) Unwrap() []error { return e }
