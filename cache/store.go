package cache

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/uring"
)

// Errors callers match with errors.Is.
var (
	// ErrNoSpace: the block was not cached because the cache is at its
	// limit or the disk is full. The data is still good; serve it anyway.
	ErrNoSpace = errors.New("cache: no space")
	// ErrCorrupt: a cached block failed its CRC check and was dropped;
	// fetch it again.
	ErrCorrupt = errors.New("cache: block failed CRC check")
	// ErrLocked: another process owns the cache directory.
	ErrLocked = errors.New("cache: directory in use")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("cache: store closed")
)

// Options configure a Store.
type Options struct {
	BlockSize int64 // bytes per block; fixed for the life of a cache dir
	// MaxBytes caps what the cache holds; 0 means "keep MinFree of the
	// filesystem free" instead.
	MaxBytes int64
	// MinFree is the fraction of the cache filesystem to leave free.
	MinFree float64
	// IdleObjects is how many unopened object states (and their file
	// descriptors) stay in memory for quick reopening.
	IdleObjects int
	// Preload, after a clean shutdown, loads the states of the most
	// recently read objects (up to IdleObjects: records, block CRCs, open
	// cache files) in the background at Open, so that the first epoch
	// after a restart opens files as fast as a warm one (a mount sets it;
	// the offline tools do not).
	Preload bool
	Engine  uring.Engine // cache-file I/O
	Index   index.Options
	Disk    Disk             // nil: RealDisk
	Clock   func() time.Time // nil: time.Now
	Logger  *slog.Logger
	// Owner is written into the lock file so a second process can say
	// who holds the directory (e.g. "mount /mnt/data").
	Owner string
}

// DefaultOptions: 1 MiB blocks, 10% of the filesystem kept free.
func DefaultOptions() Options {
	return Options{BlockSize: 1 << 20, MinFree: 0.10, IdleObjects: 4096, Index: index.DefaultOptions()}
}

// Store is the block cache in one directory. Safe for concurrent use.
type Store struct {
	dir    string
	opts   Options
	ix     *index.Index
	eng    uring.Engine
	log    *slog.Logger
	now    func() time.Time
	lock   *os.File
	limits *limiter

	used    atomic.Int64 // bytes held by present blocks (and staging files)
	evictCh chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup

	evictMu sync.Mutex                      // one eviction pass at a time (held across its I/O by design)
	touchMu sync.Mutex                      // guards touched
	touched map[index.ID]index.ObjectRecord // last-access updates not yet in the index

	mu     sync.Mutex // guards states, idle, closed, replacements
	states map[index.ID]*objectState
	// replacements counts, by version, the replacements whose grace
	// timer is running (replaced): only the last one's timer retires it.
	replacements map[index.ID]int
	idle         *list.List // of *objectState with refs == 0, most recent at front
	closed       bool

	stats Stats

	// trusted: the last run shut down cleanly, so the blocks found at
	// startup were verified before it (trust.go). Set before use.
	trusted     bool
	verifiedAll atomic.Bool // every block present is verified: a clean shutdown may say so

	// preloaded: the keys the preload loaded, set before preloadDone is
	// closed (at once when there is no preload).
	preloaded   []ObjectKey
	preloadDone chan struct{}
}

// Open opens or creates the cache in dir and takes ownership of it.
func Open(dir string, opts Options) (*Store, error) {
	if opts.BlockSize <= 0 || opts.BlockSize%4096 != 0 {
		return nil, fmt.Errorf("cache: block size %d: want a positive multiple of 4 KiB", opts.BlockSize)
	}
	if opts.Engine == nil {
		return nil, errors.New("cache: no I/O engine")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Disk == nil {
		opts.Disk = RealDisk{}
	}
	if opts.IdleObjects <= 0 {
		opts.IdleObjects = 1
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir, opts.Owner)
	if err != nil {
		return nil, err
	}
	opts.Index.Logger = opts.Logger
	ix, err := index.Open(filepath.Join(dir, "index"), opts.Index)
	if err != nil {
		unlockDir(lock)
		return nil, err
	}
	if err := upgradeLayout(dir, ix, opts.Logger); err != nil {
		ix.Close()
		unlockDir(lock)
		return nil, err
	}
	if err := ix.CheckFormat(index.Format{Version: index.FormatVersion, BlockSize: opts.BlockSize}); err != nil {
		ix.Close()
		unlockDir(lock)
		return nil, err
	}
	s := &Store{
		dir: dir, opts: opts, ix: ix, eng: opts.Engine, log: opts.Logger, now: opts.Clock, lock: lock,
		limits:       &limiter{dir: dir, disk: opts.Disk, now: opts.Clock, maxBytes: opts.MaxBytes, minFree: opts.MinFree, interval: time.Second},
		evictCh:      make(chan struct{}, 1),
		stop:         make(chan struct{}),
		states:       make(map[index.ID]*objectState),
		replacements: make(map[index.ID]int),
		touched:      make(map[index.ID]index.ObjectRecord),
		idle:         list.New(),

		preloadDone: make(chan struct{}),
	}
	if err := s.scanUsage(); err != nil {
		s.Close()
		return nil, err
	}
	trusted, err := ix.TakeClean()
	if err != nil {
		s.Close()
		return nil, err
	}
	s.trusted = trusted
	if trusted || s.used.Load() == 0 { // nothing found that needs checking
		s.verifiedAll.Store(true)
	} else if backgroundVerify {
		s.wg.Add(1)
		go s.verifyAll() // loads the states it verifies, as preload does
	}
	if trusted && opts.Preload {
		s.wg.Add(1)
		go s.preload()
	} else {
		close(s.preloadDone)
	}
	s.wg.Add(2)
	go s.evictLoop()
	go s.sweepOrphanFiles()
	s.kickEvict()
	return s, nil
}

// prepareDir creates the layout and proves the directory is writable, so
// a bad --cache-dir fails before anything is mounted.
func prepareDir(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "objects"), filepath.Join(dir, "staging")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("cache: create %s: %w", d, err)
		}
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("cache: directory %s is not writable: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// scanUsage sums the bytes of every present block and drops blocks whose
// object record is missing (left by a crash during eviction).
func (s *Store) scanUsage() error {
	var total int64
	var orphans []index.ID
	err := s.ix.ScanBlockUsage(func(id index.ID, blocks, bytes int64) error {
		if _, ok, err := s.ix.GetObject(id); err == nil && !ok {
			orphans = append(orphans, id)
			return nil
		}
		total += bytes
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range orphans {
		if _, err := s.ix.DeleteObject(id); err != nil {
			return err
		}
		os.Remove(s.pathOf(id))
	}
	s.used.Store(total)
	return nil
}

// Close stops background work, closes cache files and the index, and
// releases the directory. Objects still open stay valid for reading
// already-open files but nothing new is cached.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	states := make([]*objectState, 0, len(s.states))
	for _, st := range s.states {
		states = append(states, st)
	}
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	s.flushTouches()
	for _, st := range states {
		st.closeFile()
	}
	s.markClean()
	err := s.ix.Close()
	unlockDir(s.lock)
	return err
}

// Index exposes the store's index to the metadata cache and the write
// path, which keep their records in the same database.
func (s *Store) Index() *index.Index { return s.ix }

// Dir is the cache directory.
func (s *Store) Dir() string { return s.dir }

// BlockSize is the cache's block size.
func (s *Store) BlockSize() int64 { return s.opts.BlockSize }

// Engine is the store's I/O engine.
func (s *Store) Engine() uring.Engine { return s.eng }

// Used returns the bytes the cache holds.
func (s *Store) Used() int64 { return s.used.Load() }

// Limit returns the bytes the cache may hold now.
func (s *Store) Limit() int64 { return s.limits.Limit(s.used.Load()) }
