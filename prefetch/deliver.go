package prefetch

import "github.com/stratafs/strata/cache"

// Deliver caches block i of o from bytes that came from the origin some
// other way (a lookup that read a small file whole with its metadata), as
// a fetch of the block would: marked prefetched, then written. It does
// nothing and returns false when the block is present or a fetch of it is
// in flight or queued: a fetch that marked the block after a reader had
// claimed the delivered copy would leave a mark nobody takes. While it
// writes, the block counts as in flight to schedule.
func (f *Fetcher) Deliver(o *cache.Object, i int64, data []byte) bool {
	key := blockKey{o.ID(), i}
	f.mu.Lock()
	if f.closed || o.Has(i) || f.inflight[key] != nil || f.delivering[key] {
		f.mu.Unlock()
		return false
	}
	f.delivering[key] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.delivering, key)
		f.mu.Unlock()
	}()
	o.MarkPrefetched(i)
	if err := o.WriteBlock(i, data); err != nil {
		o.TakePrefetched(i)
		return false
	}
	return true
}
