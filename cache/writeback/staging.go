package writeback

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratafs/strata/cache/meta"
)

// Staging is one file being written through the mount: a write session.
// The manager tracks open sessions (Manager.open, by key), so that
// the end of an upload does not hide a file someone is writing again.
type Staging struct {
	m    *Manager
	name string // file name in the staging directory
	f    *os.File
	key  string // guarded by Manager.mu (a rename changes it)

	mu       sync.Mutex // guards the fields below
	size     int64
	reserved int64 // bytes accounted against the cache limit
	// dirty: the session holds content its writers meant, not yet
	// committed (a write, a truncation, a new file); a copy of the file's
	// previous content is not. failed is its first write or truncation
	// that failed (or Fail's reason): such a session is never uploaded
	// (Register refuses it), only kept aside (Keep).
	dirty  bool
	failed error
	// writers: who wrote to the session (processes, as the filesystem
	// tells them apart: NoteWriter). Only a writer's close publishes it.
	writers map[int64]struct{}
	// previous: what the file was before this session (StartFrom; zero
	// for a file the session creates), what a failed session goes back
	// to. It goes to the upload job at commit (Job.Previous).
	previous meta.Entry

	// atRelease: the session is published at its last release (see
	// PublishAtRelease); job is the upload it became. Both guarded by
	// Manager.mu.
	atRelease bool
	job       *Job

	// eager sends the file's parts while it is written (sync mode; nil
	// otherwise); it goes to the upload job at commit (eager.go).
	eager *eagerUpload
}

// newStagingName returns a fresh random name for a staging file.
func newStagingName() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewStaging creates an empty staging file, a write session of key.
func (m *Manager) NewStaging(key string) (*Staging, error) {
	name := newStagingName()
	f, err := os.OpenFile(filepath.Join(m.store.StagingDir(), name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writeback: create staging file: %w", err)
	}
	s := &Staging{m: m, name: name, f: f, key: key}
	if m.pw != nil && m.opts.Mode == Sync {
		conc := m.opts.PartConcurrency
		if conc <= 0 {
			conc = DefaultOptions().PartConcurrency
		}
		s.eager = newEager(m.ctx, m.pw, key, f, 0, conc)
		m.trackEager(s.eager)
	}
	m.mu.Lock()
	m.open[s] = struct{}{}
	m.touchLocked(key, 1, time.Now())
	m.mu.Unlock()
	return s, nil
}

// writingLocked reports whether a write session of key is open. Caller
// holds m.mu.
func (m *Manager) writingLocked(key string) bool {
	for s := range m.open {
		if s.key == key {
			return true
		}
	}
	return false
}

// untrack ends the session in Manager.open, with no upload made of it.
func (s *Staging) untrack() { s.m.endSession(s, nil) }

// endSession ends session s, which became upload job j (nil: none).
func (m *Manager) endSession(s *Staging, j *Job) {
	m.mu.Lock()
	ended := m.endSessionLocked(s, j, time.Now())
	m.mu.Unlock()
	if ended && m.delayed() {
		m.kick() // the directory's held uploads count their delay from now
	}
}

// endSessionLocked ends session s, which became job j (nil: none), and
// reports whether it was open. A session published at its release
// (PublishAtRelease) leaves j for the WaitAll calls waiting for it, in
// the same critical section, so that they find either the session or
// its job. Caller holds m.mu.
func (m *Manager) endSessionLocked(s *Staging, j *Job, now time.Time) bool {
	if _, ok := m.open[s]; !ok {
		return false // ended already
	}
	delete(m.open, s)
	m.touchLocked(s.key, -1, now)
	if s.atRelease {
		s.job = j
		m.holdEndedLocked()
	}
	return true
}

// NewStagingCopy makes a staging file of key holding a copy of the first
// n bytes of src (a reflink where the filesystem has them): writing on
// after a commit, or into an object the cache holds.
func (m *Manager) NewStagingCopy(key string, src *os.File, n int64) (*Staging, error) {
	c, err := m.NewStaging(key)
	if err != nil {
		return nil, err
	}
	if err := c.reserve(n); err != nil {
		c.Discard()
		return nil, err
	}
	if err := copyFile(c.f, src, n); err != nil {
		c.Discard()
		return nil, fmt.Errorf("writeback: copy %s: %w", src.Name(), err)
	}
	c.mu.Lock()
	c.size = n
	c.mu.Unlock()
	c.eager.wrote(0, n)
	return c, nil
}

// Name is the staging file's name (what the journal records).
func (s *Staging) Name() string { return s.name }

// Path is the staging file's path.
func (s *Staging) Path() string { return filepath.Join(s.m.store.StagingDir(), s.name) }

// Fd is the staging file's descriptor.
func (s *Staging) Fd() int { return int(s.f.Fd()) }

// Size is the staged file's size.
func (s *Staging) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// reserve makes sure the cache accounts for a file of n bytes.
func (s *Staging) reserve(n int64) error {
	s.mu.Lock()
	grow := n - s.reserved
	s.mu.Unlock()
	if grow <= 0 {
		return nil
	}
	if err := s.m.store.ReserveStaging(grow); err != nil {
		return err
	}
	s.mu.Lock()
	s.reserved += grow
	s.mu.Unlock()
	return nil
}

// WriteAt writes p at off. A write that would not fit in the cache fails
// whole with cache.ErrNoSpace; nothing is truncated.
func (s *Staging) WriteAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if err := s.reserve(end); err != nil {
		return 0, s.fail(err)
	}
	n, err := s.f.WriteAt(p, off)
	if err != nil {
		return n, s.fail(fmt.Errorf("writeback: write staging file: %w", err))
	}
	s.mu.Lock()
	s.size, s.dirty = max(s.size, end), true
	s.mu.Unlock()
	s.eager.wrote(off, end)
	return n, nil
}

// ReadAt reads the staged bytes.
func (s *Staging) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }

// Truncate sets the staged file's size.
func (s *Staging) Truncate(n int64) error {
	if err := s.reserve(n); err != nil {
		return s.fail(err)
	}
	// The parts past n are stale before the file is cut: a part send
	// that reads the shorter file then finds its part changed (eager.go).
	s.eager.truncated(n)
	if err := s.f.Truncate(n); err != nil {
		return s.fail(fmt.Errorf("writeback: truncate staging file: %w", err))
	}
	s.mu.Lock()
	s.size, s.dirty = n, true
	s.mu.Unlock()
	return nil
}

// Fail marks the session as not to be uploaded, for err, unless an
// earlier failure did: a writer killed before its close, whose bytes may
// be half of what it meant.
func (s *Staging) Fail(err error) { _ = s.fail(err) }

// fail records err as the session's failure if it is the first, and
// returns it.
func (s *Staging) fail(err error) error {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	return err
}

// Failed is the session's first failure: non-nil, it is never uploaded.
func (s *Staging) Failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// MarkDirty says the session's content is new as it stands (a file
// created, or emptied by an open with O_TRUNC): its close publishes it
// even with no write.
func (s *Staging) MarkDirty() {
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
}

// Dirty reports whether the session holds content its writers meant to
// change (a write, a truncation, MarkDirty); a session staged as a copy
// of the file and not written since is not.
func (s *Staging) Dirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirty
}

// NoteWriter records that writer (a process, as the filesystem tells them
// apart) wrote to the session, truncated it or created it.
func (s *Staging) NoteWriter(writer int64) {
	s.mu.Lock()
	if s.writers == nil {
		s.writers = map[int64]struct{}{}
	}
	s.writers[writer] = struct{}{}
	s.mu.Unlock()
}

// WrittenBy reports whether writer wrote to the session (NoteWriter): a
// close by anyone else (a forked child dropping its inherited copy) has
// nothing of its own to publish.
func (s *Staging) WrittenBy(writer int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.writers[writer]
	return ok
}

// StartFrom records e as what the file was before this session began
// (its entry as the filesystem showed it); a session never told is one
// that creates the file.
func (s *Staging) StartFrom(e meta.Entry) {
	s.mu.Lock()
	s.previous = e
	s.mu.Unlock()
}

// Previous is what the file was before this session (StartFrom), zero
// for a file the session creates: where a session whose write failed
// leaves the file, since an object is whole or not at all.
func (s *Staging) Previous() meta.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.previous
}

// Sync makes the staged bytes durable.
func (s *Staging) Sync() error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("writeback: fsync staging file: %w", err)
	}
	return nil
}

// Orphan says the session no longer stands for its key: the file's name
// went (an unlink, a rename over it) while descriptors still hold it. It
// goes on taking their writes until Discard, but sends nothing (what was
// sent of it while written is aborted) and no longer counts as the key
// being written: the file that took the name shows as the bucket's once
// its own upload lands.
func (s *Staging) Orphan() {
	s.eager.abortAsync()
	s.untrack()
}

// Discard deletes the staging file and returns its space.
func (s *Staging) Discard() {
	s.eager.abortAsync()
	s.untrack()
	s.f.Close()
	os.Remove(s.Path())
	s.mu.Lock()
	r := s.reserved
	s.reserved = 0
	s.mu.Unlock()
	s.m.store.ReleaseStaging(r)
}

// detach hands the file's reservation and name to an upload job (or to
// the kept copies) and closes this handle on it; the job owns the file
// from then on.
// The caller ends the session in Manager.open (endSession).
func (s *Staging) detach() (name string, reserved int64, eager *eagerUpload) {
	eager = s.eager // set at creation, never changed: writes read it unlocked
	s.f.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reserved
	s.reserved = 0
	return s.name, r, eager
}
