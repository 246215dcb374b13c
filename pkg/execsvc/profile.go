package execsvc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/toolcache"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Profiles of an executor: how much of the machine its sessions see.
const (
	// ProfileService is toolsvc serve's, for many tenants: processes read
	// and execute the system directories only, HOME is the session's temp
	// dir, the environment is an allowlist, and the network is off unless
	// Sandbox.Network says "host".
	ProfileService = ""
	// ProfileDevelopment is for a user's own machine, as the in-process
	// executor of `orchestrator -p`: processes get the user's HOME and
	// environment (minus the variables of DefaultEnvDenylist) and may read
	// and execute everything the user can but the deny list; they write the
	// workspace, the AddDirs, the session's temp dir and the usual tool
	// caches (a missing one is created when its tool is installed). The
	// file tools may read the whole file system but the deny list
	// (permission rules still decide). The network is the host's unless
	// Sandbox.Network says "none".
	ProfileDevelopment = "development"
)

// resolved is what Config says once the profile, the settings and the
// deny list are worked out.
type resolved struct {
	home      string
	deny      []string // deny patterns of the file tools
	denyWrite []string // paths processes must not write (settings)
	fileRO    []string // read-only roots of the file tools
	fileRW    []string // read-write roots of the file tools, besides the temp dir
	sandbox   sandbox.Config
	egress    egress.Policy // the operator's, with the settings' network lists
}

// resolve works out cfg. Root must be absolute already.
func resolve(cfg Config) (r resolved, err error) {
	dev := false
	switch cfg.Profile {
	case ProfileService:
	case ProfileDevelopment:
		dev = true
	default:
		return r, fmt.Errorf("unknown executor profile %q (want %q or %q)", cfg.Profile, ProfileService, ProfileDevelopment)
	}
	r.home = cfg.Home
	if r.home == "" {
		r.home, _ = os.UserHomeDir()
	}
	for _, d := range cfg.AddDirs {
		if !filepath.IsAbs(d) {
			return r, fmt.Errorf("added directory %q is not an absolute path", d)
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return r, fmt.Errorf("added directory %s is not a directory", d)
		}
	}
	ss := cfg.SandboxSettings.Resolve(r.home, cfg.Root)
	r.denyWrite = ss.DenyWrite

	deny := cfg.Deny
	if deny == nil {
		deny = workspace.DefaultDeny()
	}
	homes := homeDirs(r.home)
	for _, pat := range slices.Concat(deny, ss.DenyRead) {
		if !opened(pat, r.home, homes, ss.AllowRead) {
			r.deny = append(r.deny, pat)
		}
	}
	if r.deny == nil {
		r.deny = []string{} // nil would mean the defaults
	}

	sc := cfg.Sandbox
	sc.DenyPaths = slices.Concat(sc.DenyPaths, workspace.DenyLocations(r.deny, r.home, homes))
	sc.ReadWritePaths = slices.Concat(sc.ReadWritePaths, cfg.AddDirs, existing(ss.AllowWrite, cfg.Logger))
	sc.ReadOnlyPaths = slices.Concat(sc.ReadOnlyPaths, existing(ss.AllowRead, cfg.Logger))
	r.fileRW = slices.Concat(cfg.ReadWrite, cfg.AddDirs)
	r.fileRO = cfg.ReadOnly
	if dev {
		sc.ReadAll = true
		sc.Home = r.home
		if sc.EnvAllowlist == nil {
			sc.EnvAllowlist = []string{"*"}
		}
		if sc.EnvDenylist == nil {
			sc.EnvDenylist = sandbox.DefaultEnvDenylist()
		}
		if sc.Network == "" {
			sc.Network = sandbox.NetworkHost
		}
		sc.ReadWritePaths = append(sc.ReadWritePaths, cacheDirs(r.home, cfg.Logger)...)
		r.fileRO = append(r.fileRO, "/")
	}
	if sc.Network == "" {
		sc.Network = sandbox.NetworkNone
	}
	r.sandbox = sc
	if r.egress, err = operatorPolicy(cfg.Egress, ss.Network); err != nil {
		return r, err
	}
	return r, nil
}

// opened reports whether one of allowRead takes deny pattern pat out of
// the list: a place the pattern names lies at or beneath it.
func opened(pat, home string, homes, allowRead []string) bool {
	for _, loc := range workspace.DenyLocations([]string{pat}, home, homes) {
		for _, a := range allowRead {
			if loc == a || strings.HasPrefix(loc, strings.TrimSuffix(a, "/")+"/") {
				return true
			}
		}
	}
	return false
}

// homeDirs lists the home directories deny patterns that match at any
// depth are placed in: the user's, root's and those under /home, as far as
// this process can list them (a home it cannot read, the tools cannot
// either when they run as this process's user).
func homeDirs(home string) []string {
	var out []string
	add := func(d string) {
		if d == "" || slices.Contains(out, d) {
			return
		}
		if listable(d) {
			out = append(out, d)
		}
	}
	add(home)
	add("/root")
	entries, _ := os.ReadDir("/home")
	for _, e := range entries {
		if e.IsDir() {
			add(filepath.Join("/home", e.Name()))
		}
	}
	return out
}

// listable reports whether this process may list dir, reading one name.
func listable(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == nil || errors.Is(err, io.EOF)
}

// existing returns the paths that exist; settings name paths of many
// machines, so a missing one is skipped.
func existing(paths []string, log *slog.Logger) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			if log != nil {
				log.Debug("sandbox settings: path skipped", "path", p, "error", err)
			}
			continue
		}
		out = append(out, p)
	}
	return out
}

// cacheDirs returns the tool caches of home, creating those that are
// missing, of the tools that are installed, so that processes may be given
// them (a user without cargo gets no ~/.cargo).
func cacheDirs(home string, log *slog.Logger) []string {
	var out []string
	for _, d := range toolcache.Dirs(home, os.Getenv) {
		if _, err := os.Stat(d.Path); err != nil {
			if _, err := exec.LookPath(d.Command); err != nil {
				continue
			}
		}
		if err := os.MkdirAll(d.Path, 0o777); err != nil {
			if log != nil {
				log.Info("tool cache not writable by the sandbox", "tool", d.Tool, "path", d.Path, "error", err)
			}
			continue
		}
		out = append(out, d.Path)
	}
	return out
}

// checkDenyWrite refuses a session in which a path processes must not
// write lies where they may.
func checkDenyWrite(denyWrite, writable []string) error {
	for _, d := range denyWrite {
		for _, w := range writable {
			if d == w || strings.HasPrefix(d, strings.TrimSuffix(w, "/")+"/") {
				return fmt.Errorf("sandbox.filesystem.denyWrite: %s lies in %s, which processes may write; toolwire's sandbox cannot keep part of a writable directory read-only (remove the entry, or keep the path out of the writable directories)", d, w)
			}
		}
	}
	return nil
}
