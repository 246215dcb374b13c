package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// uidBlock is the granularity of claims on session ids between processes.
const uidBlock = 1024

// claims holds this process's session id pools, one per range, and the
// lock files that keep other processes of the machine off their ids.
var claims struct {
	mu    sync.Mutex
	pools map[UIDRange]*UIDPool
	locks []*os.File // held open (and locked) for the life of the process
}

// ErrUIDRangeTaken: another process of the machine gives sessions ids
// from an overlapping range.
var ErrUIDRangeTaken = errors.New("sandbox: session id range in use by another process")

// SharedUIDPool returns this process's pool of the ids of r, making it on
// first use, and claims r among the processes of the machine.
//
// A session's end kills every process of its user, so two executors that
// hand out the same ids would kill each other's calls. Within a process,
// every executor of one range shares one pool; between processes, each
// block of 1024 ids of r is locked (flock on a file in /run/toolwire, or
// the temporary directory when /run is not writable) for the life of the
// process, and a range that overlaps another process's fails with
// ErrUIDRangeTaken. The default range (DefaultSessionUIDs) is shared
// instead: each process takes its first free block of 1024 ids, so several
// unconfigured executors of one machine work side by side. Processes in
// different pid namespaces cannot see each other's processes, so
// containers need no distinct ranges; they do not share the lock
// directory either.
func SharedUIDPool(r UIDRange) (*UIDPool, error) {
	return SharedUIDPoolFor(r, 0)
}

// SharedUIDPoolFor is SharedUIDPool for a service that needs at least
// need ids at once (its most sessions, and the calls that may each hold
// an id): from the default range it takes as many consecutive free blocks
// as that takes, and a configured range smaller than need is refused.
func SharedUIDPoolFor(r UIDRange, need int) (*UIDPool, error) {
	p, err := sharedUIDPool(r, need)
	return p, settingError(SettingSessionUIDs, err)
}

func sharedUIDPool(r UIDRange, need int) (*UIDPool, error) {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	if p := claims.pools[r]; p != nil {
		return p, nil
	}
	for other := range claims.pools {
		if other.First <= r.Last && r.First <= other.Last {
			return nil, fmt.Errorf("sandbox: session id ranges %s and %s overlap in one process", r, other)
		}
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if size := r.Last - r.First + 1; need > size {
		return nil, fmt.Errorf("sandbox: session id range %s holds %d ids; the executor needs %d (for its most sessions and their calls): widen the range or allow fewer sessions", r, size, need)
	}
	dir, err := lockDir()
	if err != nil {
		return nil, err
	}
	var (
		locks []*os.File
		p     *UIDPool
	)
	if r == DefaultSessionUIDs {
		// Unconfigured: take the first run of free blocks that holds need
		// ids, so that several toolsvc of one machine need no
		// configuration.
		first, last := r.First/uidBlock, r.Last/uidBlock
		for b := first; b <= last && p == nil; {
			var run []*os.File
			sub := UIDRange{First: max(r.First, b*uidBlock)}
			next := b
			for ; next <= last; next++ {
				f, err := lockBlock(dir, next)
				if errors.Is(err, ErrUIDRangeTaken) {
					break
				}
				if err != nil {
					closeAll(run)
					return nil, err
				}
				run = append(run, f)
				sub.Last = min(r.Last, next*uidBlock+uidBlock-1)
				if sub.Last-sub.First+1 >= max(need, 1) {
					break
				}
			}
			if len(run) == 0 || sub.Last-sub.First+1 < max(need, 1) {
				closeAll(run)
				b = next + 1
				continue
			}
			if p, err = NewUIDPool(sub); err != nil {
				closeAll(run)
				return nil, err
			}
			locks = run
		}
		if p == nil {
			return nil, fmt.Errorf("%w: no %d free ids in a row are left in %s (blocks of %d are other processes'); give this executor a range of its own",
				ErrUIDRangeTaken, max(need, 1), r, uidBlock)
		}
	} else {
		for b := r.First / uidBlock; b <= r.Last/uidBlock; b++ {
			f, err := lockBlock(dir, b)
			if err != nil {
				for _, f := range locks {
					_ = f.Close()
				}
				return nil, fmt.Errorf("session ids %s: %w", r, err)
			}
			locks = append(locks, f)
		}
		var err error
		if p, err = NewUIDPool(r); err != nil {
			for _, f := range locks {
				_ = f.Close()
			}
			return nil, err
		}
	}
	if claims.pools == nil {
		claims.pools = map[UIDRange]*UIDPool{}
	}
	claims.pools[r] = p
	claims.locks = append(claims.locks, locks...)
	return p, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// lockBlock locks block b of session ids in dir for the life of the
// process; ErrUIDRangeTaken when another process holds it.
func lockBlock(dir string, b int) (*os.File, error) {
	path := filepath.Join(dir, fmt.Sprintf("session-uids-%d.lock", b))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox: lock session ids: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: ids %d-%d are another process's (lock %s); give each executor of the machine a range of its own",
				ErrUIDRangeTaken, b*uidBlock, b*uidBlock+uidBlock-1, path)
		}
		return nil, fmt.Errorf("sandbox: lock session ids: %w", err)
	}
	return f, nil
}

// lockDir returns a directory for the claim locks that every process of
// the machine (of this mount namespace) sees.
func lockDir() (string, error) {
	var errs []error
	for _, dir := range []string{"/run/toolwire", filepath.Join(os.TempDir(), "toolwire-locks")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		if unix.Access(dir, unix.W_OK) == nil {
			return dir, nil
		}
		errs = append(errs, fmt.Errorf("%s is not writable", dir))
	}
	return "", fmt.Errorf("sandbox: no directory for session id locks: %w", errors.Join(errs...))
}
