package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Backends.
const (
	// BackendLandlock confines the file system (and signals and abstract
	// unix sockets) with Landlock. It is the default.
	BackendLandlock = "landlock"
	// BackendNone applies no Landlock domain; the other measures (network,
	// user, limits, environment, process tree) still apply.
	BackendNone = "none"
)

// Network modes.
const (
	// NetworkNone gives the session a fresh network namespace with only
	// loopback up. It is the default. Processes of one session share it, so
	// a server started in the background can be reached by a later call.
	NetworkNone = "none"
	// NetworkHost leaves processes in the service's network namespace.
	NetworkHost = "host"
	// NetworkAllowlist gives the session a fresh network namespace like
	// NetworkNone, plus one way out: a socket at 127.0.0.1 inside it that
	// the service serves with an egress proxy (Runner.EgressListener),
	// which HTTP_PROXY and HTTPS_PROXY of the processes name.
	NetworkAllowlist = "allowlist"
)

// Config is the policy of a Runner.
type Config struct {
	// Backend is BackendLandlock (the default when empty) or BackendNone.
	Backend string
	// ReadOnlyPaths may be read and executed besides the workspace, the
	// temp dir and the system directories (DefaultReadOnlyPaths, of which
	// those this machine lacks are skipped). Each must exist. A few device
	// nodes (/dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom)
	// and /proc are always readable.
	ReadOnlyPaths []string
	// ReadWritePaths may be read, written and executed besides the
	// workspace and the temp dir. Each must exist.
	ReadWritePaths []string
	// SessionReadOnlyPaths may be read, not written, like ReadOnlyPaths,
	// but belong to one runner's session, so each must exist. The executor
	// lists the session's saved outputs here: they live outside the temp
	// dir so that they outlast it, and processes read them but cannot
	// change them.
	SessionReadOnlyPaths []string
	// ReadAll makes every file the user may read readable and executable,
	// not only the system directories: the development profile, for a
	// user's own machine. Device nodes stay out, except the few that are
	// always readable, and so does everything under DenyPaths.
	ReadAll bool
	// DenyPaths are absolute paths processes may neither read nor write,
	// even inside a directory they may otherwise use: keys and credentials.
	// A path that does not exist yet is kept out as well. Landlock only
	// grants, so a directory holding a denied path is not granted as a
	// whole: it may be listed (names of the entries of a denied directory
	// included), and each of its entries but the denied one is granted on
	// its own; processes cannot create or remove entries right in it.
	// A workspace or temp dir inside a denied path is refused.
	DenyPaths []string
	// Home is HOME of the processes; empty means the temp dir.
	Home string
	// Network is NetworkNone (the default when empty), NetworkAllowlist
	// or NetworkHost.
	Network string
	// RunAsUser is the user processes run as when the service runs as root:
	// a user name, a uid, or "uid:gid". Empty means the owner of the
	// workspace when that is not root, "nobody" otherwise. "root" (or "0")
	// keeps processes root, which Enforced then does not report as
	// unprivileged. It is ignored when the service does not run as root.
	RunAsUser string
	// SessionUser, when set, is a user id for this runner alone, leased
	// from a UIDPool; RunAsUser is then ignored. Processes run as that id
	// (user and group), in a private mount namespace whose /proc shows
	// only their own user's processes, so that no session sees, signals or
	// traces another's. A workspace another user owns (not root) is shown
	// to them as theirs through an id-mapped mount, so they can work in it
	// while what they write stays the owner's on disk. Close kills every
	// process of the id, wherever it went, and releases the lease. It
	// needs the service to run as root.
	SessionUser *UIDLease
	// NoSubvolumes keeps processes from making btrfs subvolumes and
	// snapshots (the ioctls fail with EPERM): a subvolume has a quota
	// group of its own, outside the quota of the workspace it was made in
	// (pkg/dirquota). It needs no_new_privs, which the runner sets anyway.
	NoSubvolumes bool
	// Limits are per-call resource limits; zero fields are unlimited.
	Limits Limits
	// Session bounds the runner's processes all together, every call
	// counted at once, through the runner's cgroup directory; zero fields
	// are unbounded. Where no controller is available they are not
	// enforced (Runner.Bounds says which are).
	Session SessionBounds
	// EnvAllowlist names the variables of the service's environment that
	// processes inherit; a trailing "*" matches a prefix, and "*" alone
	// every variable. Nil means DefaultEnvAllowlist.
	EnvAllowlist []string
	// EnvDenylist names variables processes never inherit, even when
	// EnvAllowlist lets them through: glob patterns matched against the
	// name in upper case ("*_TOKEN", "AWS_*"). See DefaultEnvDenylist.
	EnvDenylist []string
	// Logger receives degradations and cleanup failures. Nil discards.
	Logger *slog.Logger
}

// Limits are resource limits of one call (one started process and
// everything it starts). Zero means unlimited.
type Limits struct {
	// CPUTime is the CPU time of each process (RLIMIT_CPU).
	CPUTime time.Duration
	// Memory is the memory of the call in bytes: the cgroup memory limit
	// where a memory controller is available, else RLIMIT_AS per process.
	Memory int64
	// Processes is the number of tasks of the call: the cgroup pids limit
	// where a pids controller is available, else RLIMIT_NPROC, which the
	// kernel counts per user rather than per call.
	Processes int
	// FileSize is the largest file a process may write (RLIMIT_FSIZE).
	FileSize int64
	// OpenFiles is the number of open files per process (RLIMIT_NOFILE).
	OpenFiles int
}

func (l Limits) any() bool {
	return l.CPUTime > 0 || l.Memory > 0 || l.Processes > 0 || l.FileSize > 0 || l.OpenFiles > 0
}

// DefaultReadOnlyPaths returns the system paths processes may read and
// execute by default: the usual binary and library directories and the
// parts of /etc that programs need to run (users, name resolution, dynamic
// linker, time zone, certificates, alternatives, shell start-up files), but
// not credentials such as /etc/shadow or host keys.
func DefaultReadOnlyPaths() []string {
	paths := []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	for _, name := range defaultEtc {
		paths = append(paths, filepath.Join("/etc", name))
	}
	return paths
}

var defaultEtc = []string{
	"passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf",
	"host.conf", "gai.conf", "protocols", "services", "networks",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
	"ssl/certs", "ca-certificates", "ca-certificates.conf", "pki",
	"alternatives", "bash.bashrc", "profile", "profile.d", "inputrc",
	"environment", "mime.types", "magic", "magic.mime", "terminfo",
	"os-release", "debian_version", "lsb-release", "gitconfig", "mailcap",
	"locale.alias", "locale.gen", "default/locale", "mtab", "fstab",
	"subuid", "subgid", "shells", "login.defs", "xdg",
}

// alwaysReadable are readable whatever ReadOnlyPaths says: programs fail in
// odd ways without them.
var alwaysReadable = []string{"/proc", "/sys/devices/system/cpu", "/dev/random", "/dev/urandom"}

// alwaysWritable are device nodes every shell writes to.
var alwaysWritable = []string{"/dev/null", "/dev/zero", "/dev/full"}

// DefaultEnvAllowlist returns the variables inherited by default.
func DefaultEnvAllowlist() []string {
	return []string{"PATH", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "COLORTERM", "NO_COLOR"}
}

// DefaultEnvDenylist returns the variables kept from processes that
// inherit a whole environment (EnvAllowlist "*"): the model API's key and
// the usual names of tokens, passwords and cloud credentials, and the
// agents that hold keys (ssh-agent, gpg-agent, the session bus that reaches
// the desktop keyring).
func DefaultEnvDenylist() []string {
	return []string{
		"ANTHROPIC_*", "CLAUDE_CODE_OAUTH_TOKEN",
		"*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*",
		"*API_KEY*", "*APIKEY*", "*ACCESS_KEY*", "*PRIVATE_KEY*", "*_KEY", "*_KEYS",
		"AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS", "OTEL_EXPORTER_OTLP_*HEADERS",
		"SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS",
	}
}

// defaultPath is PATH when the service has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// normalize fills defaults and validates the enumerations.
func (c Config) normalize() (Config, error) {
	switch c.Backend {
	case "":
		c.Backend = BackendLandlock
	case BackendLandlock, BackendNone:
	default:
		return c, settingError(SettingBackend, fmt.Errorf("sandbox: unknown backend %q (want %q or %q)", c.Backend, BackendLandlock, BackendNone))
	}
	switch c.Network {
	case "":
		c.Network = NetworkNone
	case NetworkNone, NetworkAllowlist, NetworkHost:
	default:
		return c, settingError(SettingNetwork, fmt.Errorf("sandbox: unknown network mode %q (want %q, %q or %q)", c.Network, NetworkNone, NetworkAllowlist, NetworkHost))
	}
	for _, p := range slices.Concat(c.ReadOnlyPaths, c.ReadWritePaths, c.DenyPaths) {
		if !filepath.IsAbs(p) {
			return c, fmt.Errorf("sandbox: path %q is not absolute", p)
		}
	}
	if c.Home != "" && !filepath.IsAbs(c.Home) {
		return c, fmt.Errorf("sandbox: home %q is not absolute", c.Home)
	}
	for _, pat := range c.EnvDenylist {
		if _, err := path.Match(pat, ""); err != nil {
			return c, fmt.Errorf("sandbox: environment deny pattern %q: %w", pat, err)
		}
	}
	if c.EnvAllowlist == nil {
		c.EnvAllowlist = DefaultEnvAllowlist()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	l := c.Limits
	for _, n := range []struct {
		what  string
		value int64
	}{
		{"CPU time", int64(l.CPUTime)}, {"memory", l.Memory}, {"processes", int64(l.Processes)},
		{"file size", l.FileSize}, {"open files", int64(l.OpenFiles)},
		{"session processes", int64(c.Session.Processes)}, {"session memory", c.Session.Memory},
	} {
		if n.value < 0 {
			return c, settingError(SettingLimits, fmt.Errorf("sandbox: the %s limit is negative", n.what))
		}
	}
	if l.Processes == 1 {
		// On cgroup v1 the call's first process is forked inside the call's
		// directory, where the thread that forks it counts for that moment
		// (see spawnOne).
		return c, errors.New("sandbox: a processes limit of 1 per call leaves no room to start the call's first process inside its cgroup; give 2 or more (0: no limit)")
	}
	return c, nil
}

// identity is the user processes run as.
type identity struct {
	uid, gid int
	name     string
	switched bool // the service is root and processes are not
	session  bool // a session user of its own (Config.SessionUser)
}

// resolveIdentity decides the user of a runner whose workspace is ws.
func resolveIdentity(spec, ws string) (identity, error) {
	if os.Geteuid() != 0 {
		u := identity{uid: os.Getuid(), gid: os.Getgid()}
		if cur, err := user.Current(); err == nil {
			u.name = cur.Username
		}
		return u, nil
	}
	if spec == "" {
		spec = "nobody"
		if fi, err := os.Stat(ws); err == nil {
			if uid, gid, ok := ownerOf(fi); ok && uid != 0 {
				spec = fmt.Sprintf("%d:%d", uid, gid)
			}
		}
	}
	id, err := lookupIdentity(spec)
	if err != nil {
		return id, err
	}
	id.switched = id.uid != 0
	return id, nil
}

func lookupIdentity(spec string) (identity, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	var id identity
	if uid, err := strconv.Atoi(name); err == nil {
		id.uid, id.gid = uid, uid
		if u, err := user.LookupId(name); err == nil {
			id.name = u.Username
			id.gid, _ = strconv.Atoi(u.Gid)
		}
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return id, settingError(SettingUser, fmt.Errorf("sandbox: run-as user %q: %w", spec, err))
		}
		id.name = u.Username
		id.uid, _ = strconv.Atoi(u.Uid)
		id.gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGroup {
		gid, err := strconv.Atoi(group)
		if err != nil {
			return id, settingError(SettingUser, fmt.Errorf("sandbox: run-as user %q: the group after the colon must be numeric", spec))
		}
		id.gid = gid
	}
	if id.name == "" {
		id.name = name
	}
	return id, nil
}
