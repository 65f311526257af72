package cache

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/index"
)

// Eviction starts when the cache passes highWater percent of its limit
// and removes least recently used objects until it is under lowWater.
const (
	highWater = 95
	lowWater  = 90
)

// Stats are the store's counters since it was opened.
type Stats struct {
	WrittenBytes  atomic.Int64 // block bytes written into the cache
	ReadBytes     atomic.Int64 // bytes served from cache files
	EvictedBytes  atomic.Int64
	EvictedObjs   atomic.Int64
	CorruptBlocks atomic.Int64 // blocks that failed their CRC check
	NoSpace       atomic.Int64 // writes refused for lack of space
	EvictionScans atomic.Int64 // eviction passes (each scans the index)
}

// Stats returns the live counters.
func (s *Store) Stats() *Stats { return &s.stats }

// release drops one reference; at zero the state goes to the idle list
// (or is deleted, if a newer version retired it).
func (s *Store) release(st *objectState) {
	var drop []*objectState
	deleteIt := false
	s.mu.Lock()
	st.refs--
	if st.refs == 0 {
		switch {
		case st.loadErr != nil:
			delete(s.states, st.id)
		case st.stale:
			deleteIt = true
		default:
			st.idleElem = s.idle.PushFront(st)
			for s.idle.Len() > s.opts.IdleObjects {
				old := s.idle.Remove(s.idle.Back()).(*objectState)
				old.idleElem = nil
				delete(s.states, old.id)
				drop = append(drop, old)
			}
		}
	}
	s.mu.Unlock()
	for _, old := range drop {
		old.closeFile()
	}
	if deleteIt {
		s.deleteObject(st.id)
	}
}

// unidle takes st off the idle list. Caller holds s.mu.
func (s *Store) unidle(st *objectState) {
	if st.idleElem != nil {
		s.idle.Remove(st.idleElem)
		st.idleElem = nil
	}
}

// retire deletes an object version a newer one replaced, now if nobody
// has it open, else at its last release.
func (s *Store) retire(id index.ID) {
	s.mu.Lock()
	if st := s.states[id]; st != nil && st.refs > 0 {
		st.stale = true
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.deleteObject(id)
	}()
}

// ReplacedGrace is how long a version replaced by a newer one of its key
// stays cached before it is retired. A reader that looked the file up
// just before the replacement (another process's rename over it, a
// rewrite's upload landing) opens the inode it found right after, and
// must find those bytes here: the bucket no longer has them. Retired at
// once, the open read through to the bucket and failed with ESTALE.
const ReplacedGrace = 5 * time.Second

// replacedGrace is ReplacedGrace, shortened by tests.
var replacedGrace = ReplacedGrace

// replaced retires id, the version of key that newer replaced as its
// current one, after ReplacedGrace, unless it is current again by then.
// A Store closed first leaves it to eviction.
// A version replaced again meanwhile (current again in between: the same
// bytes saved again have the same ETag) is retired by the last timer
// only: an earlier one would cut the grace of the last replacement short.
func (s *Store) replaced(tag index.SrcTag, key string, id index.ID) {
	s.mu.Lock()
	s.replacements[id]++
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(replacedGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stop:
			return
		}
		s.mu.Lock()
		s.replacements[id]--
		last := s.replacements[id] == 0
		if last {
			delete(s.replacements, id)
		}
		s.mu.Unlock()
		if !last {
			return
		}
		if cur, had, err := s.ix.CurrentVersion(tag, key); err != nil || (had && cur == id) {
			return
		}
		s.retire(id)
	}()
}

// quiesce marks an unpinned object busy so that Acquire waits until the
// caller has finished changing it behind the index (deleting it or
// punching blocks). It returns false if the object is pinned or busy.
func (s *Store) quiesce(id index.ID) (*objectState, chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[id]
	if st != nil && (st.refs > 0 || st.deleting != nil) {
		return nil, nil, false
	}
	if st == nil {
		st = &objectState{s: s, id: id, ready: make(chan struct{})}
		close(st.ready)
		s.states[id] = st
	}
	s.unidle(st)
	st.deleting = make(chan struct{})
	return st, st.deleting, true
}

// unquiesce forgets the in-memory state (it reloads from the index on the
// next Acquire) and wakes waiters.
func (s *Store) unquiesce(id index.ID, done chan struct{}) {
	s.mu.Lock()
	delete(s.states, id)
	close(done)
	s.mu.Unlock()
}

// deleteObject removes an unpinned object from the index, the disk and
// memory. It reports false if the object is pinned.
func (s *Store) deleteObject(id index.ID) bool {
	st, done, ok := s.quiesce(id)
	if !ok {
		return false
	}
	defer s.unquiesce(id, done)
	freed, err := s.ix.DeleteObject(id)
	st.closeFile()
	if err != nil {
		s.log.Warn("cache: deleting object", "id", id, "err", err)
		return false
	}
	if rmErr := os.Remove(s.pathOf(id)); rmErr != nil && !os.IsNotExist(rmErr) {
		s.log.Warn("cache: removing cache file", "id", id, "err", rmErr)
	}
	s.used.Add(-freed)
	s.stats.EvictedBytes.Add(freed)
	s.stats.EvictedObjs.Add(1)
	return true
}

func (s *Store) kickEvict() {
	select {
	case s.evictCh <- struct{}{}:
	default:
	}
}

// evictRest: after a pass that left the cache over its limit (what is
// left is open, or staged for upload), kicks are ignored this long. Every
// block the read path cannot cache kicks the evictor, and every pass
// scans the whole index.
const evictRest = time.Second

func (s *Store) evictLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	var rest time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.evictCh:
			if time.Now().Before(rest) {
				continue
			}
		case <-tick.C:
			s.limits.Refresh()
			s.flushTouches()
		}
		rest = time.Time{}
		if _, under := s.evictNow(); !under {
			rest = time.Now().Add(evictRest)
		}
	}
}

// EvictNow brings the cache under its low-water mark if it is above the
// high-water mark (or above the limit). It returns the bytes freed. One
// eviction pass runs at a time (a gc request and the background evictor
// would otherwise both free the same shortfall).
func (s *Store) EvictNow() int64 {
	freed, _ := s.evictNow()
	return freed
}

// evictNow is EvictNow, and reports whether the cache is within its limit
// after it.
func (s *Store) evictNow() (int64, bool) {
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	used := s.used.Load()
	limit := s.limits.Limit(used)
	if used <= limit/100*highWater {
		return 0, true
	}
	freed := s.evict(used - limit/100*lowWater)
	return freed, s.used.Load() <= limit
}

// evict frees at least need bytes if it can, least recently used first.
func (s *Store) evict(need int64) int64 {
	s.stats.EvictionScans.Add(1)
	usage := map[index.ID]int64{}
	if err := s.ix.ScanBlockUsage(func(id index.ID, _, b int64) error { usage[id] = b; return nil }); err != nil {
		s.log.Warn("cache: eviction scan", "err", err)
		return 0
	}
	var cands []candidate
	err := s.ix.ScanObjects(func(id index.ID, rec index.ObjectRecord, err error) error {
		if err != nil || usage[id] == 0 {
			return nil
		}
		c := candidate{id: id, lastAccess: rec.LastAccess, bytes: usage[id], blockSize: rec.BlockSize}
		s.mu.Lock()
		if st := s.states[id]; st != nil {
			c.pinned = st.refs > 0 || st.deleting != nil
			if la := st.lastAccess.Load(); la > c.lastAccess {
				c.lastAccess = la
			}
		}
		s.mu.Unlock()
		cands = append(cands, c)
		return nil
	})
	if err != nil {
		// Evict among the records read before the error: space is still needed.
		s.log.Warn("cache: eviction scan", "err", err)
	}
	var freed int64
	for _, v := range planEviction(cands, need) {
		if v.whole {
			before := s.used.Load()
			if s.deleteObject(v.id) {
				freed += before - s.used.Load()
			}
			continue
		}
		freed += s.punchTail(v.id, v.tailBlocks)
	}
	if freed > 0 {
		s.log.Debug("cache: evicted", "bytes", freed, "used", s.used.Load())
	}
	return freed
}

// punchTail removes the n highest present blocks of an unpinned object,
// leaving a partial object; the index forgets them before the bytes go.
func (s *Store) punchTail(id index.ID, n int64) int64 {
	st, done, ok := s.quiesce(id)
	if !ok {
		return 0
	}
	defer s.unquiesce(id, done)
	st.closeFile()
	rec, ok, err := s.ix.GetObject(id)
	if err != nil || !ok {
		return 0
	}
	var present, lens []int64
	if err := s.ix.Blocks(id, func(i int64, bi index.BlockInfo) error {
		present = append(present, i)
		lens = append(lens, int64(bi.Len))
		return nil
	}); err != nil {
		return 0 // as for GetObject above: an index that cannot be read is not acted on
	}
	if int64(len(present)) > n {
		present, lens = present[len(present)-int(n):], lens[len(lens)-int(n):]
	}
	if len(present) == 0 || s.ix.DropBlocks(id, present) != nil {
		return 0
	}
	var freed int64
	f, ferr := os.OpenFile(s.pathOf(id), os.O_RDWR, 0)
	for k, i := range present {
		freed += lens[k]
		if ferr == nil {
			// The index has forgotten the block already: it counts as freed
			// (a block the index does not vouch for is never read), and a
			// failed punch only leaves its bytes allocated until the file goes.
			if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, i*rec.BlockSize, lens[k]); err != nil {
				s.log.Warn("cache: punching evicted blocks", "err", err)
			}
		}
	}
	if ferr == nil {
		f.Close()
	}
	s.used.Add(-freed)
	s.stats.EvictedBytes.Add(freed)
	return freed
}

// flushTouches writes the batched last-access updates to the index.
func (s *Store) flushTouches() {
	s.touchMu.Lock()
	batch := s.touched
	s.touched = make(map[index.ID]index.ObjectRecord)
	s.touchMu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := s.ix.PutObjects(batch); err != nil {
		s.log.Warn("cache: saving last access", "err", err)
	}
}

// sweepDelay holds the orphan sweep back after startup, so that it does not
// compete for the disk with the first epoch of a restarted mount.
var sweepDelay = 2 * time.Minute

// sweepOrphanFiles removes cache files the index does not know (left by a
// crash between forgetting an object and removing its file). It is
// housekeeping: it starts late and goes slowly.
func (s *Store) sweepOrphanFiles() {
	defer s.wg.Done()
	select {
	case <-s.stop:
		return
	case <-time.After(sweepDelay):
	}
	root := filepath.Join(s.dir, "objects")
	n := 0
	// The walk's own errors are skipped entry by entry (err != nil below):
	// a sweep that cannot read a directory simply sweeps less.
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		select {
		case <-s.stop:
			return filepath.SkipAll
		default:
		}
		if n++; n%256 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil || d.IsDir() {
			return nil
		}
		id, perr := index.ParseID(d.Name())
		if perr != nil {
			return nil
		}
		s.mu.Lock()
		_, live := s.states[id]
		s.mu.Unlock()
		if live {
			return nil
		}
		if _, ok, err := s.ix.GetObject(id); err == nil && !ok {
			os.Remove(p)
		}
		return nil
	})
}
