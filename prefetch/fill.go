package prefetch

import (
	"slices"
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

// fillParts is how many GETs of PartBlocks blocks a fill keeps in
// flight. Few streams, each at full speed, rather than the whole budget's
// worth: a read that needs a block inside a running GET waits for the
// stream to reach it, and 32 streams sharing the wire each crawl.
const fillParts = 4

// fillPause is how often a fill looks whether its window moved on.
const fillPause = 2 * time.Millisecond

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
	window := fillParts * f.opts.PartBlocks
	var next int64    // the first block not yet looked at
	var ahead []int64 // blocks the fill scheduled that are still in flight
	passStart := o.PresentBlocks()
	for !o.Complete() {
		if f.isClosed() || f.stats.FetchErrors.Load() > errs || f.stats.UncachedBlocks.Load() > uncached {
			return
		}
		ahead = slices.DeleteFunc(ahead, func(i int64) bool { return o.Has(i) || !f.inFlight(o, i) })
		if int64(len(ahead)) > window/2 {
			time.Sleep(fillPause)
			continue
		}
		if next >= o.NumBlocks() {
			if len(ahead) > 0 {
				time.Sleep(fillPause)
				continue
			}
			// A pass is over; what is missing still was dropped (budget)
			// or evicted. Another pass only if this one got somewhere.
			if o.PresentBlocks() <= passStart {
				return
			}
			next, passStart = 0, o.PresentBlocks()
		}
		last := min(next+window-int64(len(ahead)), o.NumBlocks()) - 1
		f.schedule(o, next, last, Background, f.opts.PartBlocks, false)
		for i := next; i <= last; i++ {
			if !o.Has(i) {
				ahead = append(ahead, i)
			}
		}
		next = last + 1
		time.Sleep(fillPause)
	}
}

// inFlight reports whether block i of o is being fetched.
func (f *Fetcher) inFlight(o *cache.Object, i int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight[blockKey{o.ID(), i}] != nil
}
