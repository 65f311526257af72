package index

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"golang.org/x/sys/unix"
)

// Options tune the badger database. The defaults keep its memory small:
// the index is metadata, and every byte badger holds is a byte the block
// cache and the fetch buffers cannot use.
type Options struct {
	MemTableSize   int64 // bytes per memtable
	NumMemtables   int
	BlockCacheSize int64
	IndexCacheSize int64
	Logger         *slog.Logger
}

// DefaultOptions: about 64 MiB of badger memory at most.
func DefaultOptions() Options {
	return Options{
		MemTableSize:   16 << 20,
		NumMemtables:   2,
		BlockCacheSize: 16 << 20,
		IndexCacheSize: 16 << 20,
	}
}

// Index is the badger database of one cache directory.
type Index struct {
	db     *badger.DB
	log    *slog.Logger
	stopGC chan struct{}
	gcDone chan struct{}
	// seqMu makes nextSeq's read and increment one step: the database
	// runs without conflict detection, so two concurrent transactions
	// would read the same number. It is held across that one small
	// update (no fsync), as badger's own Sequence holds its lock across
	// a lease.
	seqMu sync.Mutex
}

// Format is recorded once per cache directory; a later mount with
// incompatible settings is refused rather than misreading the cache.
type Format struct {
	Version   int   `json:"version"`
	BlockSize int64 `json:"block_size"`
}

// FormatVersion is the current on-disk format: 2 keeps cache files under
// objects/ab/<id> (1 kept them under objects/ab/cd/<id>; cache.Open moves
// them).
const FormatVersion = 2

// ErrFormat: the directory holds a cache this build cannot use as asked.
var ErrFormat = errors.New("index: incompatible cache format")

// Open opens (creating if needed) the index in dir.
func Open(dir string, opts Options) (*Index, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	bo := badger.DefaultOptions(dir).
		WithMemTableSize(opts.MemTableSize).
		WithNumMemtables(opts.NumMemtables).
		WithBlockCacheSize(opts.BlockCacheSize).
		WithIndexCacheSize(opts.IndexCacheSize).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithValueLogFileSize(64 << 20).
		WithCompression(options.Snappy).
		WithMetricsEnabled(false).
		WithDetectConflicts(false).
		WithLogger(badgerLogger{log}).
		WithLoggingLevel(badger.WARNING)
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	ix := &Index{db: db, log: log, stopGC: make(chan struct{}), gcDone: make(chan struct{})}
	ix.preallocate()
	go ix.gcLoop()
	return ix, nil
}

// preallocate gives badger's memtable files (and its discard file) their
// disk blocks. Badger creates them sparse and writes them through mmap:
// on a full disk that write is a SIGBUS, which kills the mount, where an
// allocated file keeps taking writes. A new memtable (one per 16 MiB of
// index writes) is allocated within a second of its creation.
func (ix *Index) preallocate() {
	for _, pat := range []string{"*.mem", "DISCARD"} {
		paths, _ := filepath.Glob(filepath.Join(ix.db.Opts().Dir, pat))
		for _, p := range paths {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				continue
			}
			if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
				_ = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, fi.Size()) // a hint: badger works without it
			}
			f.Close()
		}
	}
}

// Close flushes and closes the database.
func (ix *Index) Close() error {
	close(ix.stopGC)
	<-ix.gcDone
	if err := ix.db.Close(); err != nil {
		return fmt.Errorf("index: close: %w", err)
	}
	return nil
}

// Sync makes every write so far durable on disk (badger writes are
// otherwise durable against a process crash but not a power loss).
func (ix *Index) Sync() error { return ix.db.Sync() }

// CheckFormat records f on first use and verifies it afterwards.
func (ix *Index) CheckFormat(f Format) error {
	key := []byte("!format")
	return ix.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			b, _ := json.Marshal(f)
			return txn.Set(key, b)
		}
		if err != nil {
			return err
		}
		var have Format
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &have) }); err != nil {
			return fmt.Errorf("%w: unreadable format record: %v", ErrFormat, err)
		}
		if have.Version != f.Version {
			return fmt.Errorf("%w: cache format %d, this build uses %d (clear the cache: strata cache clear)", ErrFormat, have.Version, f.Version)
		}
		if have.BlockSize != f.BlockSize {
			return fmt.Errorf("%w: cache was created with block size %d, asked for %d (use --block-size %d or another cache dir)", ErrFormat, have.BlockSize, f.BlockSize, have.BlockSize)
		}
		return nil
	})
}

// ReadFormat returns the recorded format, if any.
func (ix *Index) ReadFormat() (Format, bool, error) {
	var f Format
	err := ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("!format"))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &f) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return f, false, nil
	}
	return f, err == nil, err
}

func (ix *Index) gcLoop() {
	defer close(ix.gcDone)
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	alloc := time.NewTicker(time.Second)
	defer alloc.Stop()
	for {
		select {
		case <-ix.stopGC:
			return
		case <-alloc.C:
			ix.preallocate()
		case <-t.C:
			for ix.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// SrcTag is the 8-byte tag of a source in index keys.
type SrcTag [8]byte

// TagFor derives the tag of a source string.
func TagFor(source string) SrcTag {
	sum := sha256.Sum256([]byte(source))
	var t SrcTag
	copy(t[:], sum[:8])
	return t
}

// IDFor derives the ID of one object version.
func IDFor(source, key, version string) ID {
	h := sha256.New()
	for _, s := range []string{source, key, version} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var id ID
	h.Sum(id[:0])
	return id
}

func key(kind byte, parts ...[]byte) []byte {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	k := make([]byte, 0, n)
	k = append(k, kind)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error("index: " + fmt.Sprintf(f, a...)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn("index: " + fmt.Sprintf(f, a...)) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug("index: " + fmt.Sprintf(f, a...)) }
func (b badgerLogger) Debugf(f string, a ...any)   {}

// WriteFormat records f as the cache's format (after an upgrade).
func (ix *Index) WriteFormat(f Format) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return ix.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("!format"), b) })
}
