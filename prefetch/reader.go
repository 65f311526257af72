package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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
}

// NewReader starts serving o. Objects up to SmallObject bytes that are not
// fully cached are fetched whole, in one GET, right away.
func (f *Fetcher) NewReader(o *cache.Object) *Reader {
	r := &Reader{f: f, o: o, det: newDetector(f.opts.InitialWindow, f.opts.MaxWindow)}
	if n := o.NumBlocks(); n > 0 && o.Size() <= f.opts.SmallObject && !o.Complete() {
		f.schedule(o, 0, n-1, Demand, n)
		r.scheduled = n
	}
	return r
}

// Warm fetches every missing block of o at background priority, as the
// memory budget allows; it returns how many blocks it queued.
func (f *Fetcher) Warm(o *cache.Object) int64 {
	if o.NumBlocks() == 0 {
		return 0
	}
	n, _ := f.schedule(o, 0, o.NumBlocks()-1, Background, f.opts.PartBlocks)
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
	r.readahead(off, end-off)

	bs := o.BlockSize()
	last := (end - 1) / bs
	missed := false
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
			r.f.stats.HitBytes.Add(int64(n))
			pos += int64(n)
			continue
		}
		missed = true
		n, err := r.fromFetch(ctx, i, p[pos-off:end-off], pos)
		if err != nil {
			return int(pos - off), err
		}
		r.f.stats.MissBytes.Add(int64(n))
		pos += int64(n)
	}
	if missed {
		r.f.stats.MissOps.Add(1)
	} else {
		r.f.stats.HitOps.Add(1)
	}
	return int(end - off), nil
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
			f.schedule(o, i, i, Demand, 1)
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

// readahead updates the pattern and schedules what it predicts.
func (r *Reader) readahead(off, n int64) {
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
		return
	}
	part := r.f.opts.PartBlocks
	if p == Strided {
		part = 1
	}
	if _, stopped := r.f.schedule(o, from, to, Readahead, part); stopped <= to && p == Sequential {
		// Out of budget: shrink the window and pick up from where it
		// stopped on the next read.
		r.mu.Lock()
		r.det.window = max(r.det.window/2, r.det.initial)
		r.scheduled = min(r.scheduled, stopped)
		r.mu.Unlock()
	}
}
