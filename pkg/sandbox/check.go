package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Check reports whether the kernel and the process can enforce cfg. It
// fails closed: the error lists everything the configured policy needs and
// does not get, so that a deployment never runs with less than it asked
// for. It does what a runner will do where that is cheap (a network
// namespace with loopback up). Optional extras (cgroup controllers) are not
// checked here; a runner degrades without them and says so in Enforced.
// Session users have a check of their own, CheckSessionUsers.
func Check(cfg Config) error {
	cfg, err := cfg.normalize()
	if err != nil {
		return err
	}
	var missing policyError
	if cfg.Backend == BackendLandlock {
		if abi := landlockABI(); abi < minLandlockABI {
			what := "Landlock is disabled or not built in"
			if abi > 0 {
				what = fmt.Sprintf("the kernel offers Landlock ABI %d", abi)
			}
			missing = append(missing, settingError(SettingBackend, fmt.Errorf("a Landlock ABI of %d or later (file rights, device ioctl, signal and abstract socket scoping): %s", minLandlockABI, what)))
		}
	}
	if cfg.Network == NetworkNone || cfg.Network == NetworkAllowlist {
		if err := probeNetns(); err != nil {
			missing = append(missing, settingError(SettingNetwork, fmt.Errorf("a private network namespace for network %q: %w", cfg.Network, err)))
		}
	}
	if os.Geteuid() == 0 && cfg.RunAsUser != "" {
		if _, err := lookupIdentity(cfg.RunAsUser); err != nil {
			missing = append(missing, err)
		}
	}
	// Missing system directories are skipped; the paths asked for must be
	// there.
	for _, p := range slices.Concat(cfg.ReadWritePaths, cfg.ReadOnlyPaths) {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, settingError(SettingPaths, fmt.Errorf("allowed path: %w", err)))
		}
	}
	for _, msg := range rlimitsAboveHard(cfg.Limits) {
		missing = append(missing, settingError(SettingLimits, errors.New(msg)))
	}
	if len(missing) > 0 {
		return missing
	}
	return nil
}

// rlimitsAboveHard names the limits applied as rlimits that ask for more
// than the hard limit toolsvc itself runs with. A child's hard limit can
// only be lowered, so every call would fail to start.
func rlimitsAboveHard(l Limits) []string {
	var out []string
	check := func(what string, res int, want uint64) {
		var own unix.Rlimit
		if want == 0 || unix.Getrlimit(res, &own) != nil || own.Max == unix.RLIM_INFINITY || want <= own.Max {
			return
		}
		out = append(out, fmt.Sprintf("%s of %d is above the hard limit of %d that this process runs with (%s), which a child's can only be lowered from",
			what, want, own.Max, rlimitName(res)))
	}
	if l.CPUTime > 0 {
		check("a CPU time limit in seconds", unix.RLIMIT_CPU, cpuSeconds(l.CPUTime)+1) // +1: the hard limit spawnOne sets
	}
	check("a file size limit", unix.RLIMIT_FSIZE, uint64(max(l.FileSize, 0)))
	check("an open files limit", unix.RLIMIT_NOFILE, uint64(max(l.OpenFiles, 0)))
	return out
}

// netnsWorks: a probe succeeded once. Every runner makes its namespace
// the same way and says so if it fails, so one success is enough: no
// namespace is made and thrown away per session.
var netnsWorks atomic.Bool

// probeNetns creates a network namespace and brings its loopback up, as a
// runner does, on a thread that is thrown away afterwards; after the first
// success it returns at once.
func probeNetns() error {
	if netnsWorks.Load() {
		return nil
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with the goroutine.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("%w%s", err, capHint(err, "CAP_SYS_ADMIN"))
			return
		}
		if err := loopbackUp(); err != nil {
			errc <- errors.New(strings.TrimPrefix(err.Error(), "sandbox: "))
			return
		}
		errc <- nil
	}()
	err := <-errc
	if err == nil {
		netnsWorks.Store(true)
	}
	return err
}

// CheckSessionUsers reports whether the service can give sessions users of
// their own (Config.SessionUser) with workspaces under root: it must run as
// root, mount a private /proc in a mount namespace of its own (which needs
// CAP_SYS_ADMIN and a seccomp profile that allows mount, open_tree and
// move_mount), and show a workspace another user owns through an id-mapped
// mount (a user namespace, mount_setattr, and a file system under root that
// supports id mapping). Like Check it fails closed, naming what is missing.
func CheckSessionUsers(root string) error {
	var err error
	if os.Geteuid() != 0 {
		err = errors.New("the service runs as root")
	} else {
		err = probeSessionMounts(root)
		if err != nil {
			err = errors.New(strings.TrimPrefix(err.Error(), "sandbox: "))
		}
	}
	if err != nil {
		return policyError{settingError(SettingSessionUsers, fmt.Errorf("a user of its own for each session: %w", err))}
	}
	return nil
}

// RunChildIfRequested is the hook for binaries that start sandboxed
// processes, to be called first thing in main (and in TestMain).
//
// The current design needs no child mode: confinement is applied by a
// dedicated thread of the service itself (see the package documentation),
// because re-executing a Go binary per call costs milliseconds of runtime
// start-up. The hook stays so that binaries keep working unchanged if a
// helper mode is added; today it returns at once.
func RunChildIfRequested() {}
