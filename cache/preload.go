package cache

import (
	"container/heap"
	"context"
	"os"
	"sync"
	"time"

	"github.com/stratafs/strata/cache/index"
)

// preloadWorkers load states side by side: each mostly waits for the disk.
const preloadWorkers = 4

// preload loads, after a clean shutdown, the states of the objects read
// most recently (up to IdleObjects of them, by last access): the record
// and block CRCs from the index and the open cache file, left on the idle
// list as a warm epoch leaves them. Without it the first open of each
// object after a restart reads the index and walks the cache directory
// (both out of the page cache by then), which made a restarted first
// epoch run at about half a warm one. Opens racing it simply load the
// state themselves; preload skips what is already loaded.
func (s *Store) preload() {
	defer s.wg.Done()
	var done []ObjectKey
	defer func() {
		s.preloaded = done
		close(s.preloadDone)
	}()
	start := time.Now()
	recent := &byAccess{}
	var after *index.ID
	for {
		n := 0
		err := s.ix.ScanObjectsPage(after, verifyPage, func(id index.ID, rec index.ObjectRecord, err error) error {
			n++
			after = &id
			if err != nil {
				return nil
			}
			heap.Push(recent, preloadItem{rec.LastAccess, ObjectKey{Source: rec.Source, Key: rec.Key, Version: rec.Version, Size: rec.Size, MTime: rec.MTime}})
			if recent.Len() > s.opts.IdleObjects {
				heap.Pop(recent) // the least recent
			}
			return nil
		})
		if err != nil {
			s.log.Warn("cache: listing the cache to preload it", "err", err)
			return
		}
		if n == 0 {
			break
		}
		select {
		case <-s.stop:
			return
		default:
		}
	}
	// Least recent first: each release puts its state at the front of the
	// idle list, so the most recent end up where eviction reaches last
	// (roughly: preloadWorkers load side by side, so that one file's
	// directory block and inode read from disk overlap the others').
	keys := make(chan ObjectKey)
	var doneMu sync.Mutex // guards done
	var wg sync.WaitGroup
	for range preloadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				o, err := s.acquire(k, true)
				if err != nil {
					continue // closed, evicted meanwhile, or unreadable: its open loads it
				}
				o.st.openExisting()
				o.Release()
				doneMu.Lock()
				done = append(done, k)
				doneMu.Unlock()
			}
		}()
	}
feed:
	for recent.Len() > 0 {
		k := heap.Pop(recent).(preloadItem).key
		select {
		case <-s.stop:
			break feed
		case keys <- k:
		}
	}
	close(keys)
	wg.Wait()
	if len(done) > 0 {
		s.log.Info("cache: preloaded recently read objects", "objects", len(done), "took", time.Since(start).Round(time.Millisecond))
	}
}

// EachPreloaded calls fn with each object the preload loaded, once it is
// done (at once when the store has no preload: after a crash, for the
// offline tools), and returns when all are seen, ctx is done or the store
// closes. Each object is released when fn returns. The mount uses it to
// register the cache files of a restarted mount's recent objects for
// passthrough before their first open.
func (s *Store) EachPreloaded(ctx context.Context, fn func(*Object)) {
	select {
	case <-s.preloadDone:
	case <-s.stop:
		return
	case <-ctx.Done():
		return
	}
	for _, k := range s.preloaded {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		o, err := s.acquire(k, true)
		if err != nil {
			continue // evicted meanwhile, or the store is closing
		}
		fn(o)
		o.Release()
	}
}

// openExisting opens the cache file if it exists, never creating one (a
// file that is gone is the open's to deal with).
func (st *objectState) openExisting() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.file != nil {
		return
	}
	f, err := os.OpenFile(st.s.pathOf(st.id), os.O_RDWR, 0)
	if err != nil {
		return
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != st.rec.Size {
		f.Close() // fd() sizes it when it is used
		return
	}
	st.file = f
}

type preloadItem struct {
	access int64
	key    ObjectKey
}

// byAccess is a min-heap by last access: its root is the least recent.
type byAccess []preloadItem

func (h byAccess) Len() int           { return len(h) }
func (h byAccess) Less(i, j int) bool { return h[i].access < h[j].access }
func (h byAccess) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byAccess) Push(x any)        { *h = append(*h, x.(preloadItem)) }
func (h *byAccess) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
