package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/meta"
)

// Live commits are those of a file the kernel writes straight into its
// staging file (FUSE passthrough writes: the filesystem never sees the
// writes). The kernel binds one backing file to an inode for as long as
// any descriptor of it is open, so a close that is not the last (a dup, a
// forked child's copy) cannot hand the file over and start a new one as
// a userspace write session does: the job keeps the very file the kernel
// goes on writing. It is held (no upload) until the file's last close
// (Unhold), and its journal entry records the staged size and
// modification time as they were at the last acknowledged close
// (RegisterLive and Journal, then Restage at every later close). A restart that finds
// the file changed since (written after that close, then the mount died)
// keeps it aside: what it holds was never closed, so it is never
// uploaded.

// errWrittenAfterClose is why a restart keeps a live job's file aside.
var errWrittenAfterClose = errors.New("this file was written by passthrough after its last acknowledged close and the mount stopped before the next one: what it holds was never closed, so it was not uploaded")

// fileState returns a staged file's size and modification time (unix
// nanoseconds). Safe against a concurrent Close (it then fails).
func fileState(f *os.File) (size, mtime int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("writeback: stat staging file: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.Size(), fi.ModTime().UnixNano(), nil
	}
	return st.Size, st.Mtim.Nano(), nil
}

// State returns the staged file's size and modification time as the
// kernel left them (for a file written by passthrough).
func (s *Staging) State() (size, mtime int64, err error) { return fileState(s.f) }

// Dup returns a second descriptor on the staging file, which stays valid
// after the session is committed (the caller closes it).
func (s *Staging) Dup() (*os.File, error) {
	fd, err := unix.FcntlInt(s.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("writeback: dup staging file: %w", err)
	}
	return os.NewFile(uintptr(fd), s.f.Name()), nil
}

// Reserve makes the cache account for a staged file of n bytes (the
// kernel writes a passthrough file without asking: this is done as it
// grows, so that the cache evicts to make room). ErrNoSpace if it cannot.
func (s *Staging) Reserve(n int64) error { return s.reserve(n) }

// RegisterLive is Register for st, which the kernel writes directly, at
// a close of one of its descriptors: the job takes the staged size and
// mtime as they are now (no disk I/O but an fstat, so that it may run
// under the filesystem's node locks), is held until Unhold, and its
// journal entry (Journal, which flushes the bytes first) records them.
// Later closes call Restage. It returns the job, size and mtime.
func (m *Manager) RegisterLive(key string, st *Staging, base string) (*Job, int64, int64, error) {
	size, mtime, err := fileState(st.f)
	if err != nil {
		return nil, 0, 0, err
	}
	st.mu.Lock()
	st.size = size
	st.mu.Unlock()
	j, err := m.Register(key, st, base, mtime, true)
	if err != nil {
		return nil, 0, 0, err
	}
	m.mu.Lock()
	j.rec.StagedMTime = mtime
	m.mu.Unlock()
	return j, size, mtime, nil
}

// Restage brings live job j up to date at a later close: if its file
// changed since it was journaled, the bytes are flushed and the journal
// entry rewritten with the new size and mtime. A job that is gone
// (deleted, discarded, superseded) is left alone.
func (m *Manager) Restage(ctx context.Context, j *Job) error {
	m.mu.Lock()
	_, live := m.jobs[j]
	c, rec := j.content.Acquire(), j.rec
	m.mu.Unlock()
	if !live || c == nil {
		c.Release()
		return nil
	}
	defer c.Release()
	size, mtime, err := fileState(c.f)
	if err != nil {
		return err
	}
	if size == rec.Size && mtime == rec.StagedMTime {
		return nil
	}
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("writeback: fsync staging file: %w", err)
	}
	grow := max(size-rec.Size, 0)
	if grow > 0 && m.store.ReserveStaging(grow) != nil {
		grow = 0 // best effort: the bytes are on disk either way
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, live := m.jobs[j]; !live || j.running || j.dropped != nil {
		m.store.ReleaseStaging(grow)
		return nil
	}
	j.reserved += grow
	j.rec.Size, j.rec.MTime, j.rec.StagedMTime = size, mtime, mtime
	c.size.Store(size)
	c.mtime.Store(mtime)
	return m.putUpload(j.seq, j.rec)
}

// KeepLive sets live job j's file aside instead of uploading it, for why
// (its writer was killed, or the cache disk ran nearly full while the
// kernel wrote it): nothing is uploaded, and the bytes are kept under
// failed-writes as a failed write's are.
func (m *Manager) KeepLive(j *Job, why error) {
	m.mu.Lock()
	if _, live := m.jobs[j]; !live || j.running || j.dropped != nil {
		m.mu.Unlock()
		return
	}
	j.dropped = why
	key, seq, reserved := j.rec.Key, j.seq, j.reserved
	path := filepath.Join(m.store.StagingDir(), j.rec.Staging)
	size := j.rec.Size
	if c := j.content; c != nil {
		if s, _, err := fileState(c.f); err == nil {
			size = s
		}
	}
	j.reserved = 0
	m.removeLocked(j)
	j.settle(why)
	if m.names != nil && len(m.byKey[key]) == 0 && !m.writingLocked(key) {
		dir, name := meta.Parent(key)
		m.names.ClearLocal(dir, name)
	}
	m.mu.Unlock()
	m.store.ReleaseStaging(reserved)
	// Kept first, entry deleted second: killed in between, the next mount
	// finds the bytes in failed-writes (keptAlready); the other order left
	// a staging file no entry owns, which the next mount removes.
	m.keepPath(key, path, size, why)
	if seq != 0 {
		m.deleteUpload(seq, key)
	}
}

// DiskFree returns the bytes the daemon may still write on the staging
// directory's filesystem (root may use its reserved blocks).
func (m *Manager) DiskFree() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(m.store.StagingDir(), &st); err != nil {
		return 0, fmt.Errorf("writeback: statfs staging dir: %w", err)
	}
	free := st.Bavail
	if os.Geteuid() == 0 {
		free = st.Bfree
	}
	return int64(free) * st.Bsize, nil
}

// WaitJob starts j at once (no upload delay) and waits until it is
// settled: an fsync of a file written by passthrough, whose snapshot j
// is, while later closes of the file may commit more of it.
func (m *Manager) WaitJob(ctx context.Context, j *Job) error {
	m.mu.Lock()
	m.expediteLocked(j.rec.Key)
	m.mu.Unlock()
	m.kick()
	return j.Wait(ctx)
}
