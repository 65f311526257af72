package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
)

// Mode says when close() returns.
type Mode string

const (
	// Sync: close() and fsync() return once the object is complete in the
	// bucket.
	Sync Mode = "sync"
	// Async: close() returns once the data is durable on the cache disk
	// and journaled; uploads happen in the background.
	Async Mode = "async"
)

// Options configure a Manager.
type Options struct {
	Mode        Mode
	Concurrency int // uploads at once
	// PartSize and PartConcurrency shape each multipart upload (0: the
	// backend's choice, growing with the object).
	PartSize        int64
	PartConcurrency int
	RetryMin        time.Duration // first pause before retrying a failed upload
	RetryMax        time.Duration // longest pause between retries
	Logger          *slog.Logger
}

// DefaultOptions: sync mode, 4 uploads at once, retries from 1 s to 5 min.
func DefaultOptions() Options {
	return Options{Mode: Sync, Concurrency: 4, RetryMin: time.Second, RetryMax: 5 * time.Minute}
}

// Hooks tell the filesystem what the uploader did.
type Hooks struct {
	// Uploaded: key is complete in the bucket as info.
	Uploaded func(key string, info backend.ObjectInfo, size, mtime int64)
	// Pending: key has a journaled upload (called at startup for each
	// upload found in the journal, so the file shows in the tree).
	Pending func(key string, size, mtime int64)
}

// Manager owns staging files and uploads for one source.
type Manager struct {
	store  *cache.Store
	ix     *index.Index
	w      backend.Writer
	del    backend.Deleter // may be nil
	source string
	opts   Options
	hooks  Hooks
	log    *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	mu      sync.Mutex // guards jobs, byKey, running, closed
	jobs    map[uint64]*Job
	byKey   map[string][]*Job     // in commit order
	kept    map[string]*keptWrite // writes set aside, not uploaded, by key
	running int
	closed  bool
}

// ErrReadOnly: the backend takes no writes.
var ErrReadOnly = errors.New("writeback: backend does not accept writes")

// New starts the write path of source be on store, resuming every upload
// found in the journal.
func New(store *cache.Store, be backend.Backend, opts Options, hooks Hooks) (*Manager, error) {
	w, ok := be.(backend.Writer)
	if !ok {
		return nil, ErrReadOnly
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		store: store, ix: store.Index(), w: w, source: be.String(), opts: opts, hooks: hooks, log: opts.Logger,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), jobs: map[uint64]*Job{}, byKey: map[string][]*Job{}, kept: map[string]*keptWrite{},
	}
	m.del, _ = be.(backend.Deleter)
	if err := m.restore(); err != nil {
		cancel()
		return nil, err
	}
	m.loadKept()
	m.wg.Add(1)
	go m.dispatch()
	return m, nil
}

// Mode is the manager's upload mode.
func (m *Manager) Mode() Mode { return m.opts.Mode }

// restore re-queues the journal's uploads and removes staging files no
// journal entry owns (a crash before commit left them).
func (m *Manager) restore() error {
	owned := map[string]bool{}
	err := m.ix.ScanUploads(func(seq uint64, r index.UploadRecord, err error) error {
		if err != nil {
			m.log.Error("writeback: unreadable journal entry; dropping it", "seq", seq, "err", err)
			if err := m.ix.DeleteUpload(seq); err != nil {
				m.log.Warn("writeback: clearing the journal entry", "seq", seq, "err", err)
			}
			return nil
		}
		if r.Source != m.source {
			owned[r.Staging] = true // another source's (same cache dir): leave it
			return nil
		}
		p := filepath.Join(m.store.StagingDir(), r.Staging)
		if _, err := os.Stat(p); err != nil {
			m.log.Error("writeback: journaled upload lost its staging file; dropping it", "key", r.Key, "err", err)
			if err := m.ix.DeleteUpload(seq); err != nil {
				m.log.Warn("writeback: clearing the journal entry", "key", r.Key, "err", err)
			}
			return nil
		}
		owned[r.Staging] = true
		if err := m.store.ReserveStaging(r.Size); err != nil {
			m.log.Warn("writeback: staged data over the cache limit", "key", r.Key)
		}
		j := newJob(seq, r, r.Size)
		m.jobs[seq] = j
		m.byKey[r.Key] = append(m.byKey[r.Key], j)
		if m.hooks.Pending != nil {
			m.hooks.Pending(r.Key, r.Size, r.MTime)
		}
		m.log.Info("writeback: resuming upload", "key", r.Key, "bytes", r.Size, "state", stateName(r.State))
		return nil
	})
	if err != nil {
		return err
	}
	ents, _ := os.ReadDir(m.store.StagingDir())
	for _, e := range ents {
		if !owned[e.Name()] {
			os.Remove(filepath.Join(m.store.StagingDir(), e.Name()))
		}
	}
	return nil
}

// Commit hands a finished staging file over for upload as key, based on
// version base (backend.VersionAbsent for a new file, "" for none). The
// staging handle is closed; the job owns the file. In async mode the
// data is made durable and journaled before Commit returns; in sync mode
// Commit uploads and returns the first attempt's result (a failed upload
// stays journaled and is retried in the background).
func (m *Manager) Commit(ctx context.Context, key string, st *Staging, base string, mtime int64) (*Job, error) {
	return m.commit(ctx, key, st, base, mtime, false)
}

// CommitHeld is Commit for a file still open elsewhere: in async mode the
// upload is journaled but waits for Unhold (the file's last close, or an
// fsync), so that a close of one descriptor while others still write
// publishes nothing; a newer commit of the key meanwhile supersedes it. A
// crash before Unhold uploads it at the next mount, as any journaled
// upload. In sync mode it is Commit.
func (m *Manager) CommitHeld(ctx context.Context, key string, st *Staging, base string, mtime int64) (*Job, error) {
	return m.commit(ctx, key, st, base, mtime, m.opts.Mode == Async)
}

// Unhold lets key's held uploads start.
func (m *Manager) Unhold(key string) {
	m.mu.Lock()
	for _, j := range m.byKey[key] {
		j.held = false
	}
	m.mu.Unlock()
	m.kick()
}

func (m *Manager) commit(ctx context.Context, key string, st *Staging, base string, mtime int64, held bool) (*Job, error) {
	size := st.Size()
	if m.opts.Mode == Async {
		if err := st.Sync(); err != nil {
			return nil, err
		}
	}
	name, reserved := st.detach()
	r := index.UploadRecord{
		Source: m.source, Key: key, Staging: name, Size: size, MTime: mtime,
		BaseVersion: base, Created: time.Now().UnixNano(),
	}
	seq, err := m.ix.AppendUpload(r)
	if err != nil {
		os.Remove(filepath.Join(m.store.StagingDir(), name))
		m.store.ReleaseStaging(reserved)
		return nil, err
	}
	j := newJob(seq, r, reserved)
	j.held = held
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return j, fmt.Errorf("writeback: commit %s: %w", key, context.Canceled)
	}
	m.jobs[seq] = j
	m.byKey[key] = append(m.byKey[key], j)
	m.supersedeLocked(key)
	kept := m.forgetKeptLocked(key) // written again whole
	m.mu.Unlock()
	kept.remove()
	m.kick()
	if m.opts.Mode == Async {
		return j, nil
	}
	select {
	case <-j.attempted:
		return j, j.firstErr
	case <-ctx.Done():
		return j, ctx.Err()
	}
}

// StagingPath returns the path of the staged file of key's latest pending
// upload, to copy from when the file is written again before it is up.
func (m *Manager) StagingPath(key string) (path string, size int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	js := m.byKey[key]
	if len(js) == 0 {
		return "", 0, false
	}
	j := js[len(js)-1]
	return filepath.Join(m.store.StagingDir(), j.rec.Staging), j.rec.Size, true
}

func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Close stops uploading (in-flight uploads are cancelled; everything stays
// journaled and resumes at the next mount) and waits for the workers.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

func stateName(s index.UploadState) string {
	if s == index.UploadFailed {
		return "failed"
	}
	return "pending"
}
