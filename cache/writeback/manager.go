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
	"github.com/stratafs/strata/cache/meta"
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
	// backend's choice, growing with the object). PartConcurrency is also
	// the parts in flight of a file sent while it is written (eager.go).
	PartSize        int64
	PartConcurrency int
	// Delay (async mode): an upload waits until its file has been closed
	// this long and its directory has been quiet as long (delay.go).
	Delay    time.Duration
	RetryMin time.Duration // first pause before retrying a failed upload
	RetryMax time.Duration // longest pause between retries
	Logger   *slog.Logger
	// BootID names this boot of the machine ("": read from
	// /proc/sys/kernel/random/boot_id). Staged bytes journaled without an
	// fsync (sync mode) are trusted after a restart only on the same boot.
	BootID string
}

// DefaultOptions: sync mode, 4 uploads at once of 8 parts in flight each
// (backend/s3's UploadConcurrency), a 5 s delay in async mode
// (rclone's --vfs-write-back), retries from 1 s to 5 min.
func DefaultOptions() Options {
	return Options{Mode: Sync, Concurrency: 4, PartConcurrency: 8, Delay: 5 * time.Second, RetryMin: time.Second, RetryMax: 5 * time.Minute}
}

// Names is the namespace the write path keeps current (cache/meta's
// Cache): a file waiting for its upload shows as a local entry (from the
// journal at startup too), and a completed upload becomes the bucket's
// entry before the local one goes. The manager calls it and never the
// filesystem above it. ClearLocal, SetLocal and Hide touch memory only
// (they are called under Manager.mu); Upsert and Unhide may write the
// index and are not. Hide keeps the name of a file deleted or renamed while its
// upload ran out of listings and lookups until that attempt has ended
// (its object, if it landed, taken back down: hiding.go).
type Names interface {
	SetLocal(dir string, e meta.Entry)
	ClearLocal(dir, name string)
	Upsert(dir string, e meta.Entry)
	Hide(key string)
	Unhide(key string)
}

// Manager owns staging files and uploads for one source.
type Manager struct {
	store  *cache.Store
	ix     *index.Index
	w      backend.Writer
	pw     backend.PartWriter // nil if w cannot send parts before a commit
	del    backend.Deleter    // may be nil
	stat   backend.Backend    // probes a backend that failed uploads (nil in some tests)
	source string
	opts   Options
	names  Names // may be nil
	log    *slog.Logger
	boot   string // this boot of the machine (boot.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}
	// movesDone is closed once the renames a crash cut short are finished.
	movesDone chan struct{}

	mu      sync.Mutex              // guards the fields below (and Job's, Staging.key)
	jobs    map[*Job]struct{}       // journaled jobs not settled
	byKey   map[string][]*Job       // in commit order, from Register on
	kept    map[string]*keptWrite   // writes set aside, not uploaded, by key
	open    map[*Staging]struct{}   // the open write sessions (a rename rekeys them)
	dirs    map[string]*dirActivity // async upload delay: activity by directory (delay.go)
	running int
	// inFlight counts the attempts under way by the key they write: a job
	// renamed mid-upload moves to its new key, but its attempt still
	// writes, and may take back down, the old one until it ends.
	inFlight map[string]int
	// flightEnded: closed when inFlight of its key drops to 0, for
	// WaitInFlight; made on demand.
	flightEnded map[string]chan struct{}
	// holdEnded: closed when a held upload's hold ends, for WaitAll;
	// made on demand.
	holdEnded chan struct{}
	// moving counts the file renames under way by their new key
	// (BeginMove to Done).
	moving map[string]int
	// A probe of a backend that failed uploads (retry.go).
	probing   bool
	lastProbe time.Time
	closed    bool

	fineOnce sync.Once // FineTimestamps probes once
	fine     bool

	eagerMu sync.Mutex                // a leaf: guards eagers
	eagers  map[*eagerUpload]struct{} // eager uploads not finished or aborted

	// takeDowns: the take-downs not done (takedown.go), failed ones too.
	takeDowns map[*takeDownJob]struct{}

	// overtaken: UploadOvertaken entries found by restore, dealt with
	// before the first upload (overtaken.go); only New's goroutine uses it.
	overtaken []overtakenUpload
}

// ErrReadOnly: the backend takes no writes.
var ErrReadOnly = errors.New("writeback: backend does not accept writes")

// ErrFailedSession: Register of a session with a failed write (Staging.Failed).
var ErrFailedSession = errors.New("a write to this file failed, so it is not uploaded")

// New starts the write path of source be on store, resuming every upload
// found in the journal.
func New(store *cache.Store, be backend.Backend, opts Options, names Names) (*Manager, error) {
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
		store: store, ix: store.Index(), w: w, source: be.String(), opts: opts, names: names, log: opts.Logger,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), jobs: map[*Job]struct{}{}, byKey: map[string][]*Job{}, inFlight: map[string]int{}, flightEnded: map[string]chan struct{}{}, moving: map[string]int{}, kept: map[string]*keptWrite{}, takeDowns: map[*takeDownJob]struct{}{},
		open: map[*Staging]struct{}{}, dirs: map[string]*dirActivity{}, movesDone: make(chan struct{}), eagers: map[*eagerUpload]struct{}{},
	}
	m.del, _ = be.(backend.Deleter)
	m.pw, _ = w.(backend.PartWriter)
	m.stat = be
	if m.boot = opts.BootID; m.boot == "" {
		m.boot = currentBoot()
	}
	moves := m.loadMoves()
	if err := m.restore(moves); err != nil {
		cancel()
		return nil, err
	}
	m.loadKept()
	if orphans := m.findOrphanParts(); len(orphans) > 0 {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.abortOrphanParts(m.ctx, orphans)
		}()
	}
	m.wg.Add(1)
	go func() {
		m.finishMoves(moves)  // before any upload: see moves.go
		m.takeDownOvertaken() // started; holds its keys until done: takedown.go
		close(m.movesDone)    // WaitAll then finds the take-downs
		m.dispatch()
	}()
	return m, nil
}

// Mode is the manager's upload mode.
func (m *Manager) Mode() Mode { return m.opts.Mode }

// restore re-queues the journal's uploads, under the names unfinished
// renames give them, and removes staging files no journal entry owns (a
// crash before commit left them).
func (m *Manager) restore(moves []journaledMove) error {
	owned := map[string]bool{}
	err := m.ix.ScanUploads(func(seq uint64, r index.UploadRecord, err error) error {
		if err != nil {
			m.log.Error("writeback: unreadable journal entry; dropping it", "seq", seq, "err", err)
			m.deleteUpload(seq, "")
			return nil
		}
		if r.Source != m.source {
			owned[r.Staging] = true // another source's (same cache dir): leave it
			return nil
		}
		if r.State == index.UploadOvertaken && r.ThenDeleteVersion != "" {
			// The version to take down is known: no staged bytes needed
			// (left unowned: removed below unless a job uploads them).
			m.restoreOvertaken(seq, r, false)
			return nil
		}
		p := filepath.Join(m.store.StagingDir(), r.Staging)
		f, err := os.Open(p)
		if err != nil && m.keptAlready(r.Staging) && r.State == index.UploadOvertaken {
			// A new file discarded while its upload was in flight: what
			// landed is taken down, recognised by the kept copy.
			m.restoreOvertaken(seq, r, true)
			return nil
		}
		if err != nil && m.keptAlready(r.Staging) {
			m.log.Info("writeback: a journaled upload was set aside in failed-writes before the daemon stopped; dropping its entry", "key", r.Key)
			m.deleteUpload(seq, r.Key)
			return nil
		}
		if err != nil {
			m.log.Error("writeback: journaled upload lost its staging file; dropping it", "key", r.Key, "err", err)
			m.deleteUpload(seq, r.Key)
			return nil
		}
		owned[r.Staging] = true
		if r.State == index.UploadOvertaken { // deleted while in flight: nothing to upload
			f.Close()
			m.restoreOvertaken(seq, r, false)
			return nil
		}
		if r.UnsyncedBoot != "" && r.UnsyncedBoot != m.boot {
			f.Close()
			m.keepPath(m.applyMoves(moves, r.Key), p, r.Size, errUnflushedAtReboot)
			m.deleteUpload(seq, r.Key)
			return nil
		}
		if r.StagedMTime != 0 { // written by passthrough: unchanged since its last close?
			if size, mtime, err := fileState(f); err != nil || size != r.Size || mtime != r.StagedMTime {
				f.Close()
				m.keepPath(m.applyMoves(moves, r.Key), p, max(size, r.Size), errWrittenAfterClose)
				m.deleteUpload(seq, r.Key)
				return nil
			}
		}
		if moved := m.applyMoves(moves, r.Key); moved != r.Key {
			// A rename cut short: the upload goes up under the new name,
			// unconditionally (rename replaces what the new name holds).
			r.Key, r.BaseVersion = moved, ""
			_ = m.putUpload(seq, r)
		}
		if err := m.store.ReserveStaging(r.Size); err != nil {
			m.log.Warn("writeback: staged data over the cache limit", "key", r.Key)
		}
		j := newJob(seq, r, r.Size)
		j.sent = true // an attempt before the crash may have put it
		j.content = newContent(f, r.Size, r.MTime)
		m.jobs[j] = struct{}{}
		m.byKey[r.Key] = append(m.byKey[r.Key], j)
		if m.names != nil {
			dir, name := meta.Parent(r.Key)
			m.names.SetLocal(dir, meta.Entry{Name: name, Size: r.Size, MTime: r.MTime, Version: fmt.Sprintf("local:%d", r.MTime), Local: true})
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

// Content returns the content of key's latest commit not yet uploaded,
// held for the caller (who releases it), or false if there is none: the
// file then reads as the bucket's version, which the namespace (Names)
// already shows.
func (m *Manager) Content(key string) (*Content, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	js := m.byKey[key]
	for i := len(js) - 1; i >= 0; i-- {
		if c := js[i].content; c != nil && !errors.Is(js[i].dropped, errCancelled) {
			return c.Acquire(), true
		}
	}
	return nil, false
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
	// Parts sent for files not uploaded (still being written, or
	// committed and not started) would stay in the bucket as incomplete
	// uploads: remove them. Their files are uploaded whole later.
	m.eagerMu.Lock()
	live := make([]*eagerUpload, 0, len(m.eagers))
	for e := range m.eagers {
		live = append(live, e)
	}
	m.eagerMu.Unlock()
	for _, e := range live {
		e.abort()
	}
}

func stateName(s index.UploadState) string {
	if s == index.UploadFailed {
		return "failed"
	}
	return "pending"
}
