package sandbox

import (
	"errors"
	"fmt"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// minLandlockABI is the oldest Landlock ABI that has every right the policy
// relies on: truncate (3), device ioctl (5), signal and abstract unix socket
// scoping (6).
const minLandlockABI = 6

const (
	fsFileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
	fsRead  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	fsWrite = fsRead | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	fsDevice = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// fsHandled is every file-system right up to ABI 6; character and block
	// device creation is handled and never granted.
	fsHandled = fsWrite | ll.AccessFSMakeChar | ll.AccessFSMakeBlock
	scoped    = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
)

// landlockABI returns the kernel's Landlock ABI version, 0 when Landlock is
// unavailable.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// pathRule is one "path beneath" rule.
type pathRule struct {
	path     string
	access   uint64
	optional bool // skip when the path does not exist
}

// buildRuleset creates a Landlock ruleset from rules and returns its fd.
func buildRuleset(rules []pathRule) (int, error) {
	attr := ll.RulesetAttr{HandledAccessFS: fsHandled, Scoped: scoped}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox: landlock: create ruleset: %w", err)
	}
	for _, r := range rules {
		if err := addPathRule(fd, r); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

func addPathRule(fd int, r pathRule) error {
	pfd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if r.optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("sandbox: landlock: allowed path %s: %w", r.path, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("sandbox: landlock: stat %s: %w", r.path, err)
	}
	access := r.access
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFileRights
	}
	if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: pfd}, 0); err != nil {
		return fmt.Errorf("sandbox: landlock: add rule for %s: %w", r.path, err)
	}
	return nil
}

// policyRules lists the rules of a runner: read-only system paths,
// read-write workspace, temp dir and extra paths, and the device nodes.
func policyRules(cfg Config, workspace, tempDir string, defaults bool) []pathRule {
	var rules []pathRule
	for _, p := range cfg.ReadOnlyPaths {
		rules = append(rules, pathRule{path: p, access: fsRead, optional: defaults})
	}
	for _, p := range cfg.SessionReadOnlyPaths {
		rules = append(rules, pathRule{path: p, access: fsRead})
	}
	for _, p := range alwaysReadable {
		rules = append(rules, pathRule{path: p, access: fsRead, optional: true})
	}
	for _, p := range alwaysWritable {
		rules = append(rules, pathRule{path: p, access: fsDevice, optional: true})
	}
	for _, p := range append([]string{workspace, tempDir}, cfg.ReadWritePaths...) {
		rules = append(rules, pathRule{path: p, access: fsWrite})
	}
	return rules
}

// restrictThread applies the ruleset to the calling OS thread only (no
// TSYNC flag); no_new_privs must be set on the thread already. The caller
// must be locked to its thread and never unlock it.
func restrictThread(rulesetFD int) error {
	if err := ll.LandlockRestrictSelf(rulesetFD, 0); err != nil {
		return fmt.Errorf("sandbox: landlock: restrict thread: %w", err)
	}
	return nil
}

// isDefaultReadOnly reports whether paths are the defaults, whose missing
// entries are skipped rather than refused.
func isDefaultReadOnly(paths []string) bool {
	def := DefaultReadOnlyPaths()
	if len(paths) != len(def) {
		return false
	}
	for i := range paths {
		if paths[i] != def[i] {
			return false
		}
	}
	return true
}
