package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// UIDRange is an inclusive range of numeric ids that no account of the
// machine uses. A UIDPool hands them out: each id serves as a user id and a
// group id at once.
type UIDRange struct {
	First, Last int
}

// DefaultSessionUIDs is the range toolsvc gives sessions their users from
// when it runs as root and no other range is configured.
var DefaultSessionUIDs = UIDRange{First: 200000, Last: 265535}

// IsZero reports whether r is the zero range, which means "no session
// users".
func (r UIDRange) IsZero() bool { return r == UIDRange{} }

// String returns "first-last".
func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// contains reports whether id lies in r.
func (r UIDRange) contains(id int) bool { return id >= r.First && id <= r.Last }

// ParseUIDRange parses "first-last". An empty string and "off" give the
// zero range.
func ParseUIDRange(s string) (UIDRange, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "off" {
		return UIDRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return UIDRange{}, settingError(SettingSessionUIDs, fmt.Errorf("sandbox: id range %q: want FIRST-LAST, e.g. %s", s, DefaultSessionUIDs))
	}
	r := UIDRange{First: first, Last: last}
	return r, r.validate()
}

// maxID is the largest id a range may hold: (uid_t)-1 means "no change" to
// the kernel, and the one below is commonly reserved.
const maxID = 1<<32 - 3

func (r UIDRange) validate() error {
	if r.First <= 0 || r.Last < r.First || r.Last > maxID {
		return settingError(SettingSessionUIDs, fmt.Errorf("sandbox: id range %s: want 0 < FIRST <= LAST <= %d", r, maxID))
	}
	if r.contains(65534) {
		return settingError(SettingSessionUIDs, fmt.Errorf("sandbox: id range %s holds 65534 (nobody, and the kernel's overflow id)", r))
	}
	return nil
}

// UIDPool hands out ids of a range, each to one holder at a time: a
// session's user (see Config.SessionUser) or the group that marks one call
// of a session. Ids go round the range, so that an id comes back only after
// every other one was used. One pool per range and machine: two services
// that hand out the same range would give two sessions the same user.
type UIDPool struct {
	r     UIDRange
	stale map[int]bool // ids that processes held when the pool was made

	mu     sync.Mutex // guards the fields below
	next   int
	leased map[int]bool
}

// NewUIDPool returns a pool of the ids of r. It refuses a range that holds
// an account or group of /etc/passwd or /etc/group: their files and
// processes would become the sessions'. Ids that a process of the machine
// holds now (as user, group or supplementary group: left over from an
// earlier run) are never handed out.
func NewUIDPool(r UIDRange) (*UIDPool, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		name, id, err := firstEntryIn(f, r)
		if err != nil {
			return nil, err
		}
		if name != "" {
			return nil, settingError(SettingSessionUIDs, fmt.Errorf("sandbox: id range %s holds %q (id %d) of %s: choose a range no account uses", r, name, id, f))
		}
	}
	stale := map[int]bool{}
	scanProcs(func(pi procInfo) {
		for _, id := range pi.ids() {
			if r.contains(id) {
				stale[id] = true
			}
		}
	})
	return &UIDPool{r: r, stale: stale, next: r.First, leased: make(map[int]bool)}, nil
}

// firstEntryIn returns the first entry of a passwd or group file whose id
// lies in r.
func firstEntryIn(file string, r UIDRange) (string, int, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("sandbox: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if id, err := strconv.Atoi(fields[2]); err == nil && r.contains(id) {
			return fields[0], id, nil
		}
	}
	return "", 0, sc.Err()
}

// Range returns the pool's range.
func (p *UIDPool) Range() UIDRange { return p.r }

// Lease returns an id that nobody holds. Afterwards only the pool's own
// holders make processes with its ids, and they give an id back only once
// none of its processes is left, so no scan of the machine is needed here.
func (p *UIDPool) Lease() (*UIDLease, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	size := p.r.Last - p.r.First + 1
	for range size {
		id := p.next
		if p.next++; p.next > p.r.Last {
			p.next = p.r.First
		}
		if !p.leased[id] && !p.stale[id] {
			p.leased[id] = true
			return &UIDLease{pool: p, id: id}, nil
		}
	}
	return nil, settingError(SettingSessionUIDs, fmt.Errorf("sandbox: every id of %s is in use (%d sessions and calls, %d held by processes left over); widen the range", p.r, len(p.leased), len(p.stale)))
}

// UIDLease is one id of a UIDPool, held until Release.
type UIDLease struct {
	pool *UIDPool
	id   int
	once sync.Once
}

// ID returns the leased id.
func (l *UIDLease) ID() int { return l.id }

// Release gives the id back to the pool. It is idempotent. Whoever releases
// must have made sure that no process uses the id any more.
func (l *UIDLease) Release() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		l.pool.mu.Lock()
		delete(l.pool.leased, l.id)
		l.pool.mu.Unlock()
	})
}
