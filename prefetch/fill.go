package prefetch

import (
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
)

// Random fill: a handle whose reads land at random offsets of an object
// fetches one block per miss, and each miss costs a round trip. A reader
// that keeps missing in new places (a DataLoader over one big HDF5, LMDB
// or token file, an embedding table) will read most of the object in the
// end; after fillAfterMisses such misses, objects up to Options.FillMax
// are fetched whole in the background, as the memory budget allows, so
// the reads that follow find their blocks present or already on the way.
// Reads still fetch their own block at demand priority meanwhile.

// fillAfterMisses is how many distinct blocks a handle's random reads
// must have waited for before the rest of the object is filled.
const fillAfterMisses = 8

// fillPause is how long a fill waits between scheduling rounds when the
// budget is taken or its blocks are all in flight; it doubles while
// nothing arrives, up to fillMaxPause.
const (
	fillPause    = 2 * time.Millisecond
	fillMaxPause = 100 * time.Millisecond
)

// noteRandomMiss counts a block a random read of this handle waited for,
// and starts the object's fill once there were enough of them.
func (r *Reader) noteRandomMiss() {
	o, f := r.o, r.f
	if f.opts.FillMax <= 0 || o.Size() > f.opts.FillMax || r.filled.Load() {
		return
	}
	if r.randomMisses.Add(1) < fillAfterMisses {
		return
	}
	if r.filled.CompareAndSwap(false, true) {
		f.fill(o)
	}
}

// fill fetches every missing block of o at background priority in a
// goroutine of its own, unless one is at it already. It stops when o is
// complete, the fetcher closes, a fetch fails or the cache refuses a
// block (full): what is left is fetched when read.
func (f *Fetcher) fill(o *cache.Object) {
	id := o.ID()
	f.mu.Lock()
	if f.closed || f.filling[id] {
		f.mu.Unlock()
		return
	}
	f.filling[id] = true
	f.wg.Add(1)
	f.mu.Unlock()
	f.stats.Fills.Add(1)
	go f.runFill(o.Clone(), id)
}

func (f *Fetcher) runFill(o *cache.Object, id index.ID) {
	defer f.wg.Done()
	defer o.Release()
	defer func() {
		f.mu.Lock()
		delete(f.filling, id)
		f.mu.Unlock()
	}()
	errs, uncached := f.stats.FetchErrors.Load(), f.stats.UncachedBlocks.Load()
	pause := fillPause
	for last := int64(-1); !o.Complete(); {
		if f.isClosed() || f.stats.FetchErrors.Load() > errs || f.stats.UncachedBlocks.Load() > uncached {
			return
		}
		if n := o.PresentBlocks(); n != last {
			last, pause = n, fillPause
		} else {
			pause = min(pause*2, fillMaxPause)
		}
		f.schedule(o, 0, o.NumBlocks()-1, Background, f.opts.PartBlocks, false)
		time.Sleep(pause)
	}
}
