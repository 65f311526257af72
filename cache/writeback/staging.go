package writeback

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Staging is one file being written through the mount.
type Staging struct {
	m    *Manager
	name string // file name in the staging directory
	f    *os.File

	mu       sync.Mutex // guards size, reserved
	size     int64
	reserved int64 // bytes accounted against the cache limit
}

// NewStaging creates an empty staging file.
func (m *Manager) NewStaging() (*Staging, error) {
	var b [12]byte
	rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	f, err := os.OpenFile(filepath.Join(m.store.StagingDir(), name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writeback: create staging file: %w", err)
	}
	return &Staging{m: m, name: name, f: f}, nil
}

// NewStagingFrom makes a staging file holding a copy of the first n bytes
// of the file at path (a reflink where the filesystem has them): writing
// on after a commit, or into an object the cache holds.
func (m *Manager) NewStagingFrom(path string, n int64) (*Staging, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("writeback: copy %s: %w", path, err)
	}
	defer src.Close()
	return m.NewStagingCopy(src, n)
}

// NewStagingCopy makes a staging file holding a copy of the first n bytes
// of src.
func (m *Manager) NewStagingCopy(src *os.File, n int64) (*Staging, error) {
	c, err := m.NewStaging()
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
		return 0, err
	}
	n, err := s.f.WriteAt(p, off)
	if err != nil {
		return n, fmt.Errorf("writeback: write staging file: %w", err)
	}
	s.mu.Lock()
	s.size = max(s.size, end)
	s.mu.Unlock()
	return n, nil
}

// ReadAt reads the staged bytes.
func (s *Staging) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }

// Truncate sets the staged file's size.
func (s *Staging) Truncate(n int64) error {
	if err := s.reserve(n); err != nil {
		return err
	}
	if err := s.f.Truncate(n); err != nil {
		return fmt.Errorf("writeback: truncate staging file: %w", err)
	}
	s.mu.Lock()
	s.size = n
	s.mu.Unlock()
	return nil
}

// Sync makes the staged bytes durable.
func (s *Staging) Sync() error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("writeback: fsync staging file: %w", err)
	}
	return nil
}

// Discard deletes the staging file and returns its space.
func (s *Staging) Discard() {
	s.f.Close()
	os.Remove(s.Path())
	s.mu.Lock()
	r := s.reserved
	s.reserved = 0
	s.mu.Unlock()
	s.m.store.ReleaseStaging(r)
}

// detach hands the file's reservation and name to an upload job and
// closes this handle on it; the job owns the file from then on.
func (s *Staging) detach() (name string, reserved int64) {
	s.f.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reserved
	s.reserved = 0
	return s.name, r
}
