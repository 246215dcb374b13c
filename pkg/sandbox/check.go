package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Check reports whether the kernel and the process can enforce cfg. It
// fails closed: the error lists everything the configured policy needs and
// does not get, so that a deployment never runs with less than it asked
// for. Optional extras (cgroup controllers) are not checked here; a runner
// degrades without them and says so in Enforced.
func Check(cfg Config) error {
	cfg, err := cfg.normalize()
	if err != nil {
		return err
	}
	var missing []string
	if cfg.Backend == BackendLandlock {
		if abi := landlockABI(); abi < minLandlockABI {
			what := "Landlock is disabled or not built in"
			if abi > 0 {
				what = fmt.Sprintf("the kernel offers Landlock ABI %d", abi)
			}
			missing = append(missing, fmt.Sprintf("Landlock ABI %d or later (file rights, device ioctl, signal and abstract socket scoping): %s", minLandlockABI, what))
		}
	}
	if cfg.Network == NetworkNone {
		if err := probeNetns(); err != nil {
			missing = append(missing, fmt.Sprintf("a private network namespace for network %q: %v", NetworkNone, err))
		}
	}
	if os.Geteuid() == 0 && cfg.RunAsUser != "" {
		if _, err := lookupIdentity(cfg.RunAsUser); err != nil {
			missing = append(missing, err.Error())
		}
	}
	paths := append(append([]string(nil), cfg.ReadWritePaths...), cfg.ReadOnlyPaths...)
	if isDefaultReadOnly(cfg.ReadOnlyPaths) {
		paths = cfg.ReadWritePaths
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, fmt.Sprintf("allowed path: %v", err))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("sandbox: cannot enforce the configured policy: %s", strings.Join(missing, "; "))
	}
	return nil
}

// probeNetns creates a network namespace on a thread that is thrown away
// afterwards.
func probeNetns() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with the goroutine.
		err := unix.Unshare(unix.CLONE_NEWNET)
		if errors.Is(err, unix.EPERM) {
			err = fmt.Errorf("%w (needs CAP_SYS_ADMIN)", err)
		}
		errc <- err
	}()
	return <-errc
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
