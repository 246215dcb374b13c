// Package handshake is the client's half of the Execute stream's opening:
// what a client requires of the executor's sandbox, and the check of the
// executor's Hello against it. `toolsvc call --require-sandbox` uses it,
// and so can any client of ours that needs an executor to enforce a
// protection before it sends a single call.
//
// A requirement is a word of this vocabulary, taken from Hello's
// SandboxInfo:
//
//   - a protection of SandboxInfo.enforced in lower case without its
//     PROTECTION_ prefix: file_roots, landlock_fs, landlock_scope,
//     no_new_privs, network_isolation, egress_allowlist, process_tree,
//     process_group (which process_tree also satisfies), resource_limits,
//     unprivileged_user, pid_isolation, clean_environment, workspace_quota;
//   - landlock: landlock_fs and landlock_scope;
//   - network:none, network:allowlist or network:host: a network at most
//     that open. none (network_isolation in force) satisfies all three,
//     allowlist (egress_allowlist in force) the last two;
//   - backend:NAME: SandboxInfo.backend is NAME.
//
// The package knows nothing of gRPC: a client turns its Hello into an
// Info.
package handshake

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Info is what an executor's Hello says about its sandbox.
type Info struct {
	// Backend is SandboxInfo.backend ("landlock", "none").
	Backend string
	// Enforced are the protections in force, as words (see ProtectionWord).
	Enforced []string
	// Network is SandboxInfo.network ("none", "allowlist", "host").
	Network string
}

// ProtectionWord turns the name of a Protection enum value
// ("PROTECTION_LANDLOCK_FS") into its word ("landlock_fs").
func ProtectionWord(enumName string) string {
	return strings.ToLower(strings.TrimPrefix(enumName, "PROTECTION_"))
}

// protections are the words of single protections.
var protections = []string{
	"file_roots", "landlock_fs", "landlock_scope", "no_new_privs", "network_isolation", "egress_allowlist",
	"process_tree", "process_group", "resource_limits", "unprivileged_user", "pid_isolation", "clean_environment",
	"workspace_quota",
}

// networks are the network modes, least open first.
var networks = []string{"none", "allowlist", "host"}

// Vocabulary lists every word a requirement may be, for help texts.
func Vocabulary() []string {
	words := append([]string{"landlock"}, protections...)
	for _, n := range networks {
		words = append(words, "network:"+n)
	}
	return append(words, "backend:NAME")
}

// Requirements are what a client requires; the zero value requires
// nothing.
type Requirements []string

// Parse reads a comma-separated list of requirements
// ("landlock,network:none,pid_isolation"). Unknown words are an error
// listing the vocabulary.
func Parse(spec string) (Requirements, error) {
	var out Requirements
	for _, w := range strings.Split(spec, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		if w == "" {
			continue
		}
		if err := known(w); err != nil {
			return nil, err
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, nil
}

func known(w string) error {
	switch kind, value, _ := strings.Cut(w, ":"); {
	case w == "landlock", slices.Contains(protections, w):
		return nil
	case kind == "network" && slices.Contains(networks, value):
		return nil
	case kind == "backend" && value != "":
		return nil
	}
	return fmt.Errorf("unknown sandbox requirement %q (known: %s)", w, strings.Join(Vocabulary(), ", "))
}

// MissingError says which requirements an executor does not meet.
type MissingError struct {
	// Missing are the requirements not met, each with why, in the order
	// they were required.
	Missing []string
	// Info is what the executor said.
	Info Info
}

func (e *MissingError) Error() string {
	enforced := "nothing"
	if len(e.Info.Enforced) > 0 {
		enforced = strings.Join(e.Info.Enforced, ", ")
	}
	return fmt.Sprintf("the executor does not enforce what is required: %s (it enforces %s; backend %q, network %q)",
		strings.Join(e.Missing, "; "), enforced, e.Info.Backend, e.Info.Network)
}

// ErrMissing matches a *MissingError with errors.Is.
var ErrMissing = errors.New("the executor does not enforce what is required")

// Is makes errors.Is(err, ErrMissing) hold.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// Check returns a *MissingError naming each requirement info does not
// meet, or nil.
func (r Requirements) Check(info Info) error {
	has := func(p string) bool { return slices.Contains(info.Enforced, p) }
	var missing []string
	for _, w := range r {
		kind, value, _ := strings.Cut(w, ":")
		switch {
		case w == "landlock":
			var lack []string
			for _, p := range []string{"landlock_fs", "landlock_scope"} {
				if !has(p) {
					lack = append(lack, p)
				}
			}
			if len(lack) > 0 {
				missing = append(missing, fmt.Sprintf("landlock (%s not in force)", strings.Join(lack, " and ")))
			}
		case w == "process_group":
			if !has("process_group") && !has("process_tree") {
				missing = append(missing, "process_group (neither it nor process_tree in force)")
			}
		case kind == "network":
			if !networkMeets(info, value) {
				missing = append(missing, fmt.Sprintf("%s (the network is %s)", w, describeNetwork(info)))
			}
		case kind == "backend":
			if info.Backend != value {
				missing = append(missing, fmt.Sprintf("%s (the backend is %q)", w, info.Backend))
			}
		default:
			if !has(w) {
				missing = append(missing, w+" (not in force)")
			}
		}
	}
	if len(missing) > 0 {
		return &MissingError{Missing: missing, Info: info}
	}
	return nil
}

// networkMeets reports whether info's network is at most as open as want.
// A mode counts only with the protection that enforces it.
func networkMeets(info Info, want string) bool {
	got := info.Network
	switch {
	case got == "none" && slices.Contains(info.Enforced, "network_isolation"):
	case got == "allowlist" && slices.Contains(info.Enforced, "egress_allowlist"):
	case got == "host":
	default:
		return false // a mode without its protection in force
	}
	return slices.Index(networks, got) <= slices.Index(networks, want)
}

func describeNetwork(info Info) string {
	switch {
	case info.Network == "none" && !slices.Contains(info.Enforced, "network_isolation"),
		info.Network == "allowlist" && !slices.Contains(info.Enforced, "egress_allowlist"):
		return fmt.Sprintf("%q without its protection in force", info.Network)
	}
	return fmt.Sprintf("%q", info.Network)
}
