package cache

import (
	"container/list"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/stratafs/strata/cache/index"
)

// ObjectKey identifies the object version to cache.
type ObjectKey struct {
	Source  string // backend.String()
	Key     string // full key in the source
	Version string
	Size    int64
	MTime   int64 // unix nanoseconds
}

// objectState is the in-memory picture of one cached object version,
// shared by every Object handle on it. Presence, verification and CRCs are
// read lock-free on the read path.
type objectState struct {
	s       *Store
	id      index.ID
	rec     index.ObjectRecord // fixed after load (LastAccess lives in lastAccess)
	nblocks int64

	present  bitmap          // block bytes are in the file and the index says so
	verified bitmap          // CRC checked (or written) during this run
	claimed  bitmap          // a WriteBlock is in progress
	crcs     []atomic.Uint32 // valid where present
	nPresent atomic.Int64
	nVerif   atomic.Int64
	lost     atomic.Int64 // blocks a missing or short cache file dropped, not yet reported by a verify (filecheck.go)

	// Fetched ahead of any reader and not read yet (prefetched.go).
	prefetched  bitmap
	nPrefetched atomic.Int64

	lastAccess atomic.Int64 // unix seconds
	savedAcc   atomic.Int64 // last LastAccess written to the index

	mu   sync.Mutex // guards file
	file *os.File

	// Guarded by Store.mu.
	refs     int
	idleElem *list.Element // in Store.idle while refs == 0
	stale    bool          // a newer version replaced it: delete at last release
	deleting chan struct{} // non-nil while the object is being deleted
	ready    chan struct{} // closed once loaded
	loadErr  error
}

// Object is a pinned handle on a cached object version: while any handle
// is open the object is never evicted. Release it when done.
type Object struct {
	st       *objectState
	released atomic.Bool
}

// Acquire returns a handle on the cache entry of k, creating the entry
// (empty) if it does not exist. Opening a new version of a key retires
// the previous version's entry.
func (s *Store) Acquire(k ObjectKey) (*Object, error) {
	return s.acquire(k, false)
}

// AcquireCached is Acquire for an entry the cache has: it creates none
// (an absent one is an error), and records no access. For a version that
// may be an older one of its key, which Acquire would make current.
func (s *Store) AcquireCached(k ObjectKey) (*Object, error) {
	return s.acquire(k, true)
}

// acquire is Acquire; quiet (the background verifier) neither records an
// access nor creates an entry: an object evicted meanwhile is errGone.
func (s *Store) acquire(k ObjectKey, quiet bool) (*Object, error) {
	id := index.IDFor(k.Source, k.Key, k.Version)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		st := s.states[id]
		if st != nil && st.deleting != nil {
			ch := st.deleting
			s.mu.Unlock()
			<-ch
			continue
		}
		if st != nil {
			st.refs++
			s.unidle(st)
			s.mu.Unlock()
			<-st.ready
			if st.loadErr != nil {
				err := st.loadErr
				s.release(st)
				return nil, err
			}
			if !quiet {
				st.touch()
			}
			return &Object{st: st}, nil
		}
		st = &objectState{s: s, id: id, refs: 1, ready: make(chan struct{})}
		s.states[id] = st
		s.mu.Unlock()
		st.loadErr = st.load(k, quiet)
		close(st.ready)
		if st.loadErr != nil {
			s.release(st)
			return nil, st.loadErr
		}
		if !quiet {
			st.touch()
		}
		return &Object{st: st}, nil
	}
}

// MaxBlocks bounds the blocks of one cached object, whose presence bitmaps
// and CRCs live in memory (about 4.4 bytes per block): 1<<27 blocks is
// 128 TiB at 1 MiB blocks, far past the 5 TiB S3 and GCS allow. A bigger
// object (a sparse file in a file:// source) is refused, not allocated.
const MaxBlocks = 1 << 27

// ErrTooLarge: the object is too large to cache (or has a negative size).
// It wraps EFBIG, which the reader sees.
var ErrTooLarge = fmt.Errorf("cache: object too large to cache: %w", syscall.EFBIG)

// load reads the entry's record and block presence from the index, or
// creates the record.
func (st *objectState) load(k ObjectKey, mustExist bool) error {
	s := st.s
	if k.Size < 0 || (index.ObjectRecord{Size: k.Size, BlockSize: s.opts.BlockSize}).NumBlocks() > MaxBlocks {
		return fmt.Errorf("cache: open %s (%d bytes): %w", k.Key, k.Size, ErrTooLarge)
	}
	rec, ok, err := s.ix.GetObject(st.id)
	if err != nil {
		return err
	}
	if !ok && mustExist {
		return errGone
	}
	if ok && rec.Size != k.Size {
		// Same version, different size: the record is not to be trusted.
		s.log.Warn("cache: record disagrees with source, dropping it", "key", k.Key, "cached_size", rec.Size, "size", k.Size)
		freed, err := s.ix.DeleteObject(st.id)
		if err != nil {
			return err
		}
		s.used.Add(-freed)
		os.Remove(s.pathOf(st.id))
		ok = false
	}
	if !ok {
		rec = index.ObjectRecord{
			Source: k.Source, Key: k.Key, Version: k.Version, Size: k.Size, MTime: k.MTime,
			BlockSize: s.opts.BlockSize, LastAccess: s.now().Unix(),
		}
		if err := s.ix.PutObject(st.id, rec); err != nil {
			return err
		}
		tag := index.TagFor(k.Source)
		if prev, had, err := s.ix.CurrentVersion(tag, k.Key); err == nil && had && prev != st.id {
			s.replaced(tag, k.Key, prev)
		}
		if err := s.ix.SetCurrentVersion(tag, k.Key, st.id); err != nil {
			return err
		}
	}
	st.rec = rec
	st.nblocks = rec.NumBlocks()
	st.present = newBitmap(st.nblocks)
	st.verified = newBitmap(st.nblocks)
	st.claimed = newBitmap(st.nblocks)
	st.prefetched = newBitmap(st.nblocks)
	st.crcs = make([]atomic.Uint32, st.nblocks)
	st.lastAccess.Store(rec.LastAccess)
	st.savedAcc.Store(rec.LastAccess)
	err = s.ix.Blocks(st.id, func(i int64, bi index.BlockInfo) error {
		if i >= st.nblocks || int64(bi.Len) != rec.BlockLen(i) {
			return nil // not ours to trust; it will be refetched
		}
		st.crcs[i].Store(bi.CRC)
		if st.present.set(i) {
			st.nPresent.Add(1)
		}
		if s.trusted && st.verified.set(i) { // verified before a clean shutdown
			st.nVerif.Add(1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Blocks trusted from a clean shutdown are only as good as the file
	// still holding them (filecheck.go).
	st.checkPath()
	return nil
}

// touch records an access. The index learns of it at most once a minute
// per object, in batches written in the background: an open must not wait
// for a database write.
func (st *objectState) touch() {
	now := st.s.now().Unix()
	st.lastAccess.Store(now)
	if now-st.savedAcc.Load() < 60 {
		return
	}
	st.savedAcc.Store(now)
	rec := st.rec
	rec.LastAccess = now
	st.s.touchMu.Lock()
	st.s.touched[st.id] = rec
	st.s.touchMu.Unlock()
}

// fd returns the cache file's descriptor, opening (and sizing) it first.
// A file missing or shorter than the object would be created or extended
// with holes that read as zeros: the blocks it lost are dropped first
// (checkOpen), under st.mu, so no reader gets the descriptor before.
func (st *objectState) fd() (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.file != nil {
		return int(st.file.Fd()), nil
	}
	p := st.s.pathOf(st.id)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return -1, fmt.Errorf("cache: create dir for %s: %w", st.rec.Key, err)
		}
		f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		return -1, fmt.Errorf("cache: open file for %s: %w", st.rec.Key, err)
	}
	size, err := st.checkOpen(f)
	if err != nil {
		f.Close()
		return -1, err
	}
	if size != st.rec.Size {
		if err := f.Truncate(st.rec.Size); err != nil {
			f.Close()
			return -1, fmt.Errorf("cache: size file for %s: %w", st.rec.Key, err)
		}
	}
	st.file = f
	return int(f.Fd()), nil
}

func (st *objectState) closeFile() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.file != nil {
		st.file.Close()
		st.file = nil
	}
}

// Release unpins the object. Further use of the handle is a bug.
func (o *Object) Release() {
	if o.released.Swap(true) {
		return
	}
	o.st.s.release(o.st)
}

// Clone returns another handle on the same object (for work that may
// outlive the caller's handle).
func (o *Object) Clone() *Object {
	s := o.st.s
	s.mu.Lock()
	o.st.refs++
	s.mu.Unlock()
	return &Object{st: o.st}
}

// Key returns the object's identity.
func (o *Object) Key() ObjectKey {
	r := o.st.rec
	return ObjectKey{Source: r.Source, Key: r.Key, Version: r.Version, Size: r.Size, MTime: r.MTime}
}

// ID is the object's cache identity.
func (o *Object) ID() index.ID { return o.st.id }

// Size is the object's size in bytes.
func (o *Object) Size() int64 { return o.st.rec.Size }

// BlockSize is the cache's block size.
func (o *Object) BlockSize() int64 { return o.st.rec.BlockSize }

// NumBlocks is the number of blocks covering the object.
func (o *Object) NumBlocks() int64 { return o.st.nblocks }

// BlockLen is the length of block i.
func (o *Object) BlockLen(i int64) int64 { return o.st.rec.BlockLen(i) }

// Has reports whether block i is cached.
func (o *Object) Has(i int64) bool { return o.st.present.has(i) }

// HasRange reports whether every block covering [off, off+n) is cached.
func (o *Object) HasRange(off, n int64) bool {
	end := min(off+n, o.st.rec.Size)
	if n <= 0 || off >= end {
		return true
	}
	bs := o.st.rec.BlockSize
	return o.st.present.hasRange(off/bs, (end-1)/bs+1)
}

// Complete reports whether every block is cached.
func (o *Object) Complete() bool { return o.st.nPresent.Load() == o.st.nblocks }

// PresentBlocks is how many blocks are cached.
func (o *Object) PresentBlocks() int64 { return o.st.nPresent.Load() }

// Verified reports whether every block is cached and has passed its CRC
// check (or was written) during this run: the condition for handing the
// file to the kernel.
func (o *Object) Verified() bool { return o.st.nVerif.Load() == o.st.nblocks }

// CachedBytes is what the object's present blocks hold.
func (o *Object) CachedBytes() int64 {
	var n int64
	for i := range o.st.nblocks {
		if o.st.present.has(i) {
			n += o.st.rec.BlockLen(i)
		}
	}
	return n
}

// Fd returns the cache file's descriptor for FUSE passthrough. It stays
// open while the object is pinned.
func (o *Object) Fd() (int, error) { return o.st.fd() }
