package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stratafs/strata/cache"
)

// Reader serves reads of one open file from the cache, fetching what is
// missing and reading ahead by the handle's pattern. One per open handle;
// ReadAt may be called concurrently (the kernel issues async reads).
type Reader struct {
	f *Fetcher
	o *cache.Object

	mu        sync.Mutex // guards det and scheduled
	det       detector
	scheduled int64 // readahead was scheduled up to this block (exclusive)

	// fetched: blocks the origin delivered in this run that this reader
	// claimed (their reads are not cache hits).
	fetched blockSet

	// randomMisses counts blocks random reads waited for; filled is set
	// once they started the object's fill (fill.go).
	randomMisses atomic.Int32
	filled       atomic.Bool
}

// NewReader starts serving o. Objects up to SmallObject bytes that are not
// fully cached are fetched whole, in one GET, right away.
func (f *Fetcher) NewReader(o *cache.Object) *Reader {
	r := &Reader{f: f, o: o, det: newDetector(f.opts.InitialWindow, f.opts.MaxWindow)}
	if n := o.NumBlocks(); n > 0 && o.Size() <= f.opts.SmallObject && !o.Complete() {
		f.schedule(o, 0, n-1, Demand, n, false)
		r.scheduled = n
	}
	return r
}

// Warm fetches every missing block of o at background priority, as the
// memory budget allows; it returns how many blocks it queued. Warming is
// asked for (strata warm, --warm-on-mount): reads of what it fetched are
// cache hits.
func (f *Fetcher) Warm(o *cache.Object) int64 { return f.warm(o, true) }

// Prefetch is Warm for what readers are predicted to read next (the
// directory prefetch): reads of what it fetched are prefetch hits.
func (f *Fetcher) Prefetch(o *cache.Object) int64 { return f.warm(o, false) }

func (f *Fetcher) warm(o *cache.Object, asked bool) int64 {
	if o.NumBlocks() == 0 {
		return 0
	}
	n, _ := f.schedule(o, 0, o.NumBlocks()-1, Background, f.opts.PartBlocks, asked)
	return n
}

// ReadAt fills p from offset off and returns the bytes read; at the end of
// the object it returns fewer (io.EOF is not an error here: it returns
// n < len(p) and nil, as FUSE expects).
func (r *Reader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	o := r.o
	size := o.Size()
	if off >= size || len(p) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(p)), size)
	pattern := r.readahead(off, end-off)

	bs := o.BlockSize()
	last := (end - 1) / bs
	missed, ahead := false, false
	pos := off
	for pos < end {
		i := pos / bs
		if o.Has(i) {
			j := i
			for j < last && o.Has(j+1) {
				j++
			}
			runEnd := min((j+1)*bs, end)
			n, err := o.ReadAt(p[pos-off:runEnd-off], pos)
			if errors.Is(err, cache.ErrCorrupt) {
				continue // dropped; the next pass fetches it
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return int(pos - off), err
			}
			if r.countFound(pos, int64(n)) {
				ahead = true
			}
			pos += int64(n)
			continue
		}
		missed = true
		n, err := r.fromFetch(ctx, i, p[pos-off:end-off], pos)
		if err != nil {
			return int(pos - off), err
		}
		if n > 0 {
			// The rest of the block is in the cache now, fetched for this
			// reader: its next reads of it are not cache hits. Added
			// before the mark is taken (see countFound).
			r.fetched.add(i, o.NumBlocks())
			o.TakePrefetched(i)
			if pattern == Random {
				r.noteRandomMiss()
			}
		}
		r.f.stats.MissBytes.Add(int64(n))
		pos += int64(n)
	}
	switch {
	case missed:
		r.f.stats.MissOps.Add(1)
	case ahead:
		r.f.stats.PrefetchHitOps.Add(1)
	default:
		r.f.stats.HitOps.Add(1)
	}
	return int(end - off), nil
}

// countFound counts n bytes from pos read from present blocks: hit bytes
// for blocks found in the cache, prefetch hit bytes for blocks the origin
// delivered in this run (a block's prefetch mark goes to the first reader
// that reads it, and stays with it for the reads that follow). It reports
// whether any were prefetched. The mark is taken before this reader's own
// set is checked: a concurrent read of the same handle that waited for
// the block adds it to the set before taking the mark, so one of the two
// checks sees it.
func (r *Reader) countFound(pos, n int64) bool {
	o := r.o
	bs := o.BlockSize()
	var hit, pre int64
	for end := pos + n; pos < end; {
		i := pos / bs
		m := min((i+1)*bs, end) - pos
		if o.TakePrefetched(i) {
			r.fetched.add(i, o.NumBlocks())
			pre += m
		} else if r.fetched.has(i) {
			pre += m
		} else {
			hit += m
		}
		pos += m
	}
	if hit > 0 {
		r.f.stats.HitBytes.Add(hit)
	}
	if pre > 0 {
		r.f.stats.PrefetchHitBytes.Add(pre)
	}
	return pre > 0
}

// CountOpenHit counts an open of the fully cached o that the kernel reads
// itself (FUSE passthrough): no read will reach a Reader, so the open is
// the hit, with the object's size as its bytes; a prefetch hit if any of
// its blocks came from the origin in this run and no reader has read it.
func (f *Fetcher) CountOpenHit(o *cache.Object) {
	if o.TakeAllPrefetched() {
		f.stats.PrefetchHitOps.Add(1)
		f.stats.PrefetchHitBytes.Add(o.Size())
		return
	}
	f.stats.HitOps.Add(1)
	f.stats.HitBytes.Add(o.Size())
}

// blockSet is a set of block indices, allocated at the first add (a
// reader of a warm object never allocates one).
type blockSet struct {
	words atomic.Pointer[[]atomic.Uint64]
}

func (s *blockSet) has(i int64) bool {
	w := s.words.Load()
	return w != nil && (*w)[i>>6].Load()&(1<<(uint(i)&63)) != 0
}

// add puts i (of n blocks) in the set.
func (s *blockSet) add(i, n int64) {
	w := s.words.Load()
	if w == nil {
		nw := make([]atomic.Uint64, (n+63)/64)
		if s.words.CompareAndSwap(nil, &nw) {
			w = &nw
		} else {
			w = s.words.Load()
		}
	}
	(*w)[i>>6].Or(1 << (uint(i) & 63))
}

// fromFetch copies block i's bytes from pos into p, waiting for (or
// starting) its fetch. It returns 0, nil if the block turned up in the
// cache meanwhile.
func (r *Reader) fromFetch(ctx context.Context, i int64, p []byte, pos int64) (int, error) {
	f, o := r.f, r.o
	for attempt := 0; ; attempt++ {
		fl := f.join(o, i)
		if fl == nil {
			if o.Has(i) {
				return 0, nil
			}
			if n, _ := f.schedule(o, i, i, Demand, 1, false); n == 0 {
				runtime.Gosched() // present, or being delivered (Deliver) right now
			}
			continue
		}
		select {
		case <-fl.done:
		case <-ctx.Done():
			fl.release()
			return 0, ctx.Err()
		}
		if err := fl.err; err != nil {
			fl.release()
			// A readahead cut short by the budget is retried as demand.
			if (errors.Is(err, errNoBudget) || errors.Is(err, errClosed) && !f.isClosed()) && attempt < 8 {
				continue
			}
			return 0, fmt.Errorf("prefetch: block %d of %s: %w", i, o.Key().Key, err)
		}
		start := pos - i*o.BlockSize()
		n := copy(p, fl.buf[start:])
		fl.release()
		return n, nil
	}
}

func (f *Fetcher) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// readahead updates the pattern, schedules what it predicts and returns
// the pattern.
func (r *Reader) readahead(off, n int64) Pattern {
	o := r.o
	bs := o.BlockSize()
	nb := o.NumBlocks()
	r.mu.Lock()
	p := r.det.observe(off, n)
	window := r.det.window
	stride := r.det.stride
	var from, to int64 // blocks to schedule, inclusive
	switch p {
	case Sequential:
		// Top the window up only once half of it has been consumed, so
		// each top-up is one batch of GETs instead of a GET per block as
		// the read position slides.
		from = max((off+n+bs-1)/bs, r.scheduled)
		to = min((off+n+window-1)/bs, nb-1)
		if from*bs > off+n+window/2 && from > (off+n+bs-1)/bs {
			to = from - 1 // more than half a window is already ahead
		}
		if to >= from {
			r.scheduled = to + 1
			r.f.stats.WindowBytes.Add(window)
			r.f.stats.WindowTopUps.Add(1)
		}
	case Strided:
		from, to = (off+stride)/bs, min((off+stride*4+n-1)/bs, nb-1)
	default:
		r.scheduled = 0
		from, to = 1, 0
	}
	r.mu.Unlock()
	if to < from {
		return p
	}
	part := r.f.opts.PartBlocks
	if p == Strided {
		part = 1
	}
	if _, stopped := r.f.schedule(o, from, to, Readahead, part, false); stopped <= to && p == Sequential {
		// Out of budget: shrink the window and pick up from where it
		// stopped on the next read.
		r.mu.Lock()
		r.det.window = max(r.det.window/2, r.det.initial)
		r.scheduled = min(r.scheduled, stopped)
		r.mu.Unlock()
	}
	return p
}
