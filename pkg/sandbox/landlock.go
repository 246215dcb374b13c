package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	noFollow bool // a symbolic link gets no rule (entries of a carved directory)
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
	flags := unix.O_PATH | unix.O_CLOEXEC
	if r.noFollow {
		flags |= unix.O_NOFOLLOW
	}
	pfd, err := unix.Open(r.path, flags, 0)
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
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil // only with noFollow: a link swapped in since the listing
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

// policyRules lists the rules of a runner: read-only system paths (or,
// with ReadAll, the whole file system but /dev), read-write workspace, temp
// dir and extra paths, and the device nodes, each carved around the denied
// paths.
func policyRules(cfg Config, workspace, tempDir string) []pathRule {
	deny := denySet(cfg.DenyPaths)
	var rules []pathRule
	if cfg.ReadAll {
		// Device nodes would give raw disks and memory; the few that
		// programs need are granted below.
		rules = carve(rules, pathRule{path: "/", access: fsRead}, slices.Concat(deny, []string{"/dev"}))
	} else {
		for _, p := range DefaultReadOnlyPaths() {
			rules = carve(rules, pathRule{path: p, access: fsRead, optional: true}, deny)
		}
	}
	for _, p := range cfg.ReadOnlyPaths {
		rules = carve(rules, pathRule{path: p, access: fsRead}, deny)
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
		rules = carve(rules, pathRule{path: p, access: fsWrite}, deny)
	}
	return rules
}

// denySet returns the denied paths, clean, each also under the name it
// resolves to when symbolic links lead elsewhere: Landlock sees the file
// system as it is, whichever name a process uses.
func denySet(paths []string) []string {
	var out []string
	for _, p := range paths {
		p = filepath.Clean(p)
		out = append(out, p)
		if real := resolveExisting(p); real != p {
			out = append(out, real)
		}
	}
	return out
}

// resolveExisting resolves the symbolic links of the longest part of p
// that exists and appends the rest.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// carve appends the rules that give r.access to r.path and everything
// beneath it except the denied paths. Without a denied path beneath, that
// is r itself. Otherwise the directory gets only the right to list it, and
// each of its entries but a denied one is carved in turn; entries that are
// symbolic links get no rule (what they point to has rules of its own). A
// path at or under a denied one gets nothing.
func carve(rules []pathRule, r pathRule, deny []string) []pathRule {
	real := r.path
	if !r.noFollow {
		if p, err := filepath.EvalSymlinks(r.path); err == nil {
			real = p
		}
	}
	var below []string
	for _, d := range deny {
		if within(real, d) {
			return rules
		}
		if within(d, real) {
			below = append(below, d)
		}
	}
	if len(below) == 0 {
		return append(rules, r)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		// Not a directory (a denied path cannot be beneath a file) or
		// gone: nothing to grant. Unreadable: the user cannot list it
		// either, so there is nothing for processes to list.
		return rules
	}
	if list := r.access & ll.AccessFSReadDir; list != 0 {
		rules = append(rules, pathRule{path: real, access: list, optional: true, noFollow: true})
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		rules = carve(rules, pathRule{path: filepath.Join(real, e.Name()), access: r.access, optional: true, noFollow: true}, below)
	}
	return rules
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
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
