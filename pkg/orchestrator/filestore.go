package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// fileStore is a Store over transcript files, for one process: the
// transcripts are files, while bindings, leases and events live in memory
// (a process that restarts takes its executor sessions over anew, and no
// other process shares its sessions).
type fileStore struct {
	files *transcript.Store

	mu       sync.Mutex // guards the maps
	bindings map[string]Binding
	leases   map[string]fileLease
	events   map[string][]StoredEvent
	notes    map[int]func(Note) // listeners, by a number of their own
	nextNote int
}

type fileLease struct {
	holder string
	expiry time.Time
}

// FileStore returns a Store over the transcript files of st, for a single
// process. Closing it closes st.
func FileStore(st *transcript.Store) Store {
	return &fileStore{files: st, bindings: map[string]Binding{}, leases: map[string]fileLease{}, events: map[string][]StoredEvent{},
		notes: map[int]func(Note){}}
}

func (f *fileStore) Create(_ context.Context, id string, cfg SessionConfig, created time.Time) error {
	if err := transcript.CheckID(id); err != nil {
		return err
	}
	return f.files.Create(id, cfg, created)
}

func (f *fileStore) Append(_ context.Context, id string, rec transcript.Record) error {
	return f.files.Append(id, rec)
}

func (f *fileStore) Load(_ context.Context, id string) (*transcript.Transcript, error) {
	return f.files.Load(id)
}

func (f *fileStore) List(context.Context) ([]transcript.Summary, error) { return f.files.List() }

func (f *fileStore) Remove(_ context.Context, id string) error {
	if err := f.files.Remove(id); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.bindings, id)
	delete(f.leases, id)
	delete(f.events, id)
	f.mu.Unlock()
	return nil
}

func (f *fileStore) Release(id string) { f.files.Release(id) }

// exists reports ErrNotFound for a session without a transcript.
func (f *fileStore) exists(id string) error {
	ids, err := f.files.IDs()
	if err != nil {
		return err
	}
	for _, x := range ids {
		if x == id {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNotFound, id)
}

func (f *fileStore) Bind(_ context.Context, id string, b Binding) error {
	if err := f.exists(id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bindings[id] = b
	return nil
}

func (f *fileStore) Binding(_ context.Context, id string) (Binding, error) {
	if err := f.exists(id); err != nil {
		return Binding{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bindings[id], nil
}

func (f *fileStore) Acquire(_ context.Context, id, holder string, ttl time.Duration) error {
	if err := f.exists(id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.leases[id]; ok && l.holder != holder {
		return &LeaseError{Holder: l.holder, Expiry: l.expiry}
	}
	f.leases[id] = fileLease{holder: holder, expiry: time.Now().Add(ttl)}
	return nil
}

func (f *fileStore) Renew(_ context.Context, id, holder string, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.leases[id]; !ok || l.holder != holder {
		return fmt.Errorf("session %s: %w", id, ErrLeaseLost)
	}
	f.leases[id] = fileLease{holder: holder, expiry: time.Now().Add(ttl)}
	return nil
}

func (f *fileStore) TakeOver(_ context.Context, id, holder string, ttl time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok || !l.expiry.Before(time.Now()) {
		return false, nil
	}
	f.leases[id] = fileLease{holder: holder, expiry: time.Now().Add(ttl)}
	return true, nil
}

func (f *fileStore) EndLease(_ context.Context, id, holder string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.leases[id]; ok && l.holder == holder {
		delete(f.leases, id)
	}
	return nil
}

func (f *fileStore) Expired(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	var ids []string
	for id, l := range f.leases {
		if l.expiry.Before(now) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (f *fileStore) Lease(_ context.Context, id string) (string, time.Time, error) {
	if err := f.exists(id); err != nil {
		return "", time.Time{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.leases[id]
	return l.holder, l.expiry, nil
}

func (f *fileStore) AddEvent(_ context.Context, id string, ev StoredEvent) error {
	if err := f.exists(id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	evs := f.events[id]
	var last uint64
	if n := len(evs); n > 0 {
		last = evs[n-1].Seq
	}
	if ev.Seq != last+1 {
		return fmt.Errorf("%w: session %s: event %d after %d", ErrEventConflict, id, ev.Seq, last)
	}
	ev.Data = append([]byte(nil), ev.Data...)
	f.events[id] = append(evs, ev)
	if ev.ExecSeq > 0 {
		b := f.bindings[id]
		b.Seq = ev.ExecSeq
		f.bindings[id] = b
	}
	return nil
}

func (f *fileStore) Events(_ context.Context, id string, after uint64, limit int) ([]StoredEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []StoredEvent
	for _, ev := range f.events[id] {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (f *fileStore) LastEvent(_ context.Context, id string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs := f.events[id]
	if len(evs) == 0 {
		return 0, nil
	}
	return evs[len(evs)-1].Seq, nil
}

func (f *fileStore) Notify(_ context.Context, n Note) error {
	f.mu.Lock()
	var fs []func(Note)
	for _, fn := range f.notes {
		fs = append(fs, fn)
	}
	f.mu.Unlock()
	for _, fn := range fs {
		fn(n)
	}
	return nil
}

func (f *fileStore) Listen(ctx context.Context, ready func(), fn func(Note)) error {
	f.mu.Lock()
	key := f.nextNote
	f.nextNote++
	f.notes[key] = fn
	f.mu.Unlock()
	ready()
	<-ctx.Done()
	f.mu.Lock()
	delete(f.notes, key)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fileStore) Shared() bool { return false }

func (f *fileStore) Close() error { return f.files.Close() }
