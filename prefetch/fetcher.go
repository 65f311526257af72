package prefetch

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
)

var (
	// ErrBackendDown marks a fetch the breaker failed without a request:
	// the backend is known to be down, and the failure that found it so
	// was logged. Callers log these at debug level only: during an outage
	// every read of uncached data fails this way, and warnings for each
	// (the fetcher's and the filesystem's) flooded the log in the cache
	// dir, 149 lines for 50 reads (TestOutageIsNotLoggedPerRead).
	ErrBackendDown = errors.New("prefetch: backend known to be down, no request sent")
	errClosed      = errors.New("prefetch: fetcher closed")
	// errNoBudget ends a readahead block that could not get a buffer.
	errNoBudget = errors.New("prefetch: no buffer budget")
)

type blockKey struct {
	id  index.ID
	idx int64
}

// flight is one block being fetched. Its buffer is valid once done is
// closed with err nil, until the last reference is released.
type flight struct {
	key  blockKey
	task *task
	done chan struct{}
	buf  []byte
	err  error
	refs atomic.Int32 // the task's own plus one per waiter
	f    *Fetcher
	// pending: counted in Fetcher.pendingBlocks until it gets a buffer.
	pending atomic.Bool
}

// unpend drops the flight's budget reservation, once.
func (fl *flight) unpend() {
	if fl.pending.Swap(false) {
		fl.f.pendingBlocks.Add(-1)
	}
}

func (fl *flight) release() {
	if fl.refs.Add(-1) == 0 && fl.buf != nil {
		fl.f.budget.Put(fl.buf)
		fl.buf = nil
	}
}

// task is one ranged GET for blocks [first, first+len(flights)) of an object.
type task struct {
	obj     *cache.Object // the task's own pinned handle
	first   int64
	flights []*flight
	prio    atomic.Int32  // a Priority; raised only while queued
	elem    *list.Element // while queued; guarded by scheduler.mu
	warm    bool          // asked-for warming: its blocks are not marked prefetched
}

func (t *task) priority() Priority { return Priority(t.prio.Load()) }

// abort fails every block of a task that never ran.
func (t *task) abort(err error) {
	f := t.flights[0].f
	defer f.wg.Done()
	for _, fl := range t.flights {
		f.finish(fl, nil, err)
	}
	t.obj.Release()
}

// Fetcher fetches blocks into the cache. Safe for concurrent use.
type Fetcher struct {
	be     backend.Backend
	budget *Budget
	opts   Options
	log    *slog.Logger
	sched  *scheduler
	stats  Stats
	health *backend.Breaker

	// stopping is cancelled by Close: the GETs in flight end at once
	// rather than wait out their timeouts on an endpoint gone silent.
	stopping context.Context
	stop     context.CancelFunc

	mu       sync.Mutex
	inflight map[blockKey]*flight
	filling  map[index.ID]bool // objects a random fill is running for
	// delivering: blocks Deliver is writing (schedule skips them).
	delivering map[blockKey]bool
	changed    map[cache.ObjectKey]struct{} // versions found changed and warned about (changed.go)
	closed     bool
	wg         sync.WaitGroup

	pendingBlocks atomic.Int64 // prefetch blocks queued without a buffer yet
}

// New returns a fetcher reading from be into cache objects, taking block
// buffers from budget.
func New(be backend.Backend, budget *Budget, opts Options) *Fetcher {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Attempts = max(opts.Attempts, 1)
	opts.PartBlocks = max(opts.PartBlocks, 1)
	f := &Fetcher{be: be, budget: budget, opts: opts, log: opts.Logger, inflight: map[blockKey]*flight{}, filling: map[index.ID]bool{}, delivering: map[blockKey]bool{}}
	f.stopping, f.stop = context.WithCancel(context.Background())
	f.health = backend.NewBreaker(time.Second, nil, nil)
	f.sched = newScheduler(opts.MaxFetches, f.run)
	return f
}

// Stats returns the live counters.
func (f *Fetcher) Stats() *Stats { return &f.stats }

// CountLookupFetch counts n bytes a lookup brought with a file's metadata
// (a small file read whole by its lookup, then cached): fetched from the
// origin like a demand read's, though no GET of the fetcher's carried it.
func (f *Fetcher) CountLookupFetch(n int64) {
	f.stats.FetchedBytes[Demand].Add(n)
	f.stats.Fetches[Demand].Add(1)
}

// Budget returns the fetcher's memory budget.
func (f *Fetcher) Budget() *Budget { return f.budget }

// Options returns the fetcher's options.
func (f *Fetcher) Options() Options { return f.opts }

// Queued reports waiting tasks per priority and how many run.
func (f *Fetcher) Queued() ([numPriorities]int, int) { return f.sched.queued() }

// Close aborts queued fetches, cancels running ones (a GET waiting on an
// endpoint gone silent would otherwise hold the unmount for its timeout)
// and waits for them to end.
func (f *Fetcher) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.stop()
	f.sched.close()
	f.wg.Wait()
}

// schedule starts fetches for the missing, not-in-flight blocks of
// [first, last] of o at priority p, in GETs of at most partBlocks blocks.
// Their blocks are marked prefetched (see Stats) unless warm: warming a
// user asked for fills the cache, and reads of it are hits. It returns
// how many blocks it scheduled and the block it stopped at (last+1 when
// it went through; below Demand it stops at the first block it has no
// budget for).
func (f *Fetcher) schedule(o *cache.Object, first, last int64, p Priority, partBlocks int64, warm bool) (n, stopped int64) {
	stopped = last + 1
	var t *task
	flush := func() {
		if t != nil {
			f.wg.Add(1)
			f.sched.enqueue(t)
			t = nil
		}
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return 0, first
	}
	for i := first; i <= last && i < o.NumBlocks(); i++ {
		key := blockKey{o.ID(), i}
		if o.Has(i) {
			flush()
			continue
		}
		if f.delivering[key] {
			flush()
			continue
		}
		if fl := f.inflight[key]; fl != nil {
			flush()
			if p < fl.task.priority() {
				f.sched.promote(fl.task, p)
			}
			continue
		}
		if p != Demand && f.budget.Free() <= f.reserved() {
			f.stats.ShrunkWindows.Add(1)
			stopped = i
			break
		}
		if t != nil && int64(len(t.flights)) >= partBlocks {
			flush()
		}
		if t == nil {
			t = &task{obj: o.Clone(), first: i, warm: warm}
			t.prio.Store(int32(p))
		}
		fl := &flight{key: key, task: t, done: make(chan struct{}), f: f}
		fl.refs.Store(1)
		if p != Demand {
			fl.pending.Store(true)
			f.pendingBlocks.Add(1)
		}
		t.flights = append(t.flights, fl)
		f.inflight[key] = fl
		n++
	}
	f.mu.Unlock()
	flush()
	return n, stopped
}

// reserved is how many budget buffers queued prefetch tasks will need:
// scheduling more than the budget can feed would only queue blocks that
// are later dropped. Caller holds f.mu.
func (f *Fetcher) reserved() int64 { return f.pendingBlocks.Load() }

// wait returns the flight of block i of o, promoting it to demand, or nil
// if the block is not being fetched. The caller releases the flight.
func (f *Fetcher) join(o *cache.Object, i int64) *flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.inflight[blockKey{o.ID(), i}]
	if fl == nil {
		return nil
	}
	fl.refs.Add(1)
	if fl.task.priority() != Demand {
		f.sched.promote(fl.task, Demand)
	}
	return fl
}

// publish hands buf (or err) to the flight's waiters. The flight stays in
// the table until retire, so nobody starts a second fetch of the block.
func (f *Fetcher) publish(fl *flight, buf []byte, err error) {
	fl.unpend()
	fl.buf, fl.err = buf, err
	close(fl.done)
}

// retire takes the flight out of the table (its block is now present, or
// failed) and drops the task's reference.
func (f *Fetcher) retire(fl *flight) {
	f.mu.Lock()
	if f.inflight[fl.key] == fl {
		delete(f.inflight, fl.key)
	}
	f.mu.Unlock()
	fl.release()
}

// finish publishes and retires at once.
func (f *Fetcher) finish(fl *flight, buf []byte, err error) {
	f.publish(fl, buf, err)
	f.retire(fl)
}

// run executes one task: one GET (resumed on failure) streaming its
// blocks to waiters and into the cache.
func (f *Fetcher) run(t *task) {
	defer f.wg.Done()
	defer f.sched.done()
	defer t.obj.Release()
	o := t.obj
	bs := o.BlockSize()
	next := 0 // first flight not yet completed
	var lastErr error
	for attempt := 0; attempt < f.opts.Attempts && next < len(t.flights); attempt++ {
		if attempt > 0 {
			f.stats.Retries.Add(1)
			time.Sleep(f.opts.RetryBackoff << (attempt - 1))
		}
		var progressed, started bool
		next, progressed, started, lastErr = f.fetchFrom(t, next, bs)
		// The backend already retried getting a response; only a body
		// that broke mid-way is worth resuming here.
		if lastErr == nil || !started || errors.Is(lastErr, errNoBudget) || f.stopping.Err() != nil {
			break
		}
		if progressed {
			attempt = 0 // a stream that moves forward deserves fresh attempts
		}
	}
	if next < len(t.flights) {
		if lastErr == nil {
			lastErr = errClosed
		}
		switch {
		case errors.Is(lastErr, errNoBudget):
		case f.stopping.Err() != nil: // cut by Close: nobody reads on
			lastErr = fmt.Errorf("prefetch: %s: %w", o.Key().Key, errClosed)
		case errors.Is(lastErr, ErrBackendDown):
			f.stats.FetchErrors.Add(1)
			f.log.Debug("prefetch: fetch failed", "key", o.Key().Key, "block", t.first+int64(next), "err", lastErr)
		case errors.Is(lastErr, backend.ErrVersionChanged):
			f.stats.FetchErrors.Add(1)
			if k := o.Key(); f.firstChangeOf(k) {
				f.log.Warn("prefetch: the object changed in the bucket since this version was looked up: its uncached blocks cannot be read (ESTALE); further failures of this version are logged at debug level", "key", k.Key, "version", k.Version, "block", t.first+int64(next), "err", lastErr)
			} else {
				f.log.Debug("prefetch: fetch failed", "key", k.Key, "block", t.first+int64(next), "err", lastErr)
			}
		default:
			f.stats.FetchErrors.Add(1)
			f.log.Warn("prefetch: fetch failed", "key", o.Key().Key, "block", t.first+int64(next), "err", lastErr)
		}
		for _, fl := range t.flights[next:] {
			f.finish(fl, nil, lastErr)
		}
	}
}

// readRange is the backend's ReadRange given ResponseTimeout to answer:
// past it, cancel ends the request and the fetch fails as ErrUnavailable.
func (f *Fetcher) readRange(ctx context.Context, cancel context.CancelFunc, k cache.ObjectKey, off, n int64) (io.ReadCloser, error) {
	if f.opts.ResponseTimeout <= 0 {
		return f.be.ReadRange(ctx, k.Key, k.Version, off, n)
	}
	timer := time.AfterFunc(f.opts.ResponseTimeout, cancel)
	body, err := f.be.ReadRange(ctx, k.Key, k.Version, off, n)
	if timer.Stop() {
		return body, err
	}
	if body != nil {
		body.Close()
	}
	return nil, fmt.Errorf("prefetch: get %s: no response within %s: %w (%v)", k.Key, f.opts.ResponseTimeout, backend.ErrUnavailable, err)
}

// fetchFrom GETs blocks flights[from:] in one request, completing each as
// its bytes arrive. It returns the index of the first flight not done,
// whether any block completed, and whether the response had started.
func (f *Fetcher) fetchFrom(t *task, from int, bs int64) (next int, progressed, started bool, err error) {
	o := t.obj
	start := (t.first + int64(from)) * bs
	end := min((t.first+int64(len(t.flights)))*bs, o.Size())
	ctx, cancel := context.WithTimeout(f.stopping, f.opts.RequestTimeout)
	defer cancel()
	k := o.Key()
	probe, err := f.health.Allow()
	if err != nil {
		return from, false, false, fmt.Errorf("%w: %w", ErrBackendDown, err)
	}
	sent := f.health.Now()
	body, err := f.readRange(ctx, cancel, k, start, end-start)
	f.health.Done(probe, sent, err)
	if err != nil {
		return from, false, false, err
	}
	defer body.Close()
	prio := t.priority()
	f.stats.Fetches[prio].Add(1)
	i := from
	for ; i < len(t.flights); i++ {
		fl := t.flights[i]
		blen := o.BlockLen(fl.key.idx)
		var buf []byte
		if prio == Demand || fl.refs.Load() > 1 {
			buf = f.budget.Get()
		} else if b, ok := f.budget.TryGet(); ok {
			buf = b
			fl.unpend()
		} else {
			return i, i > from, true, errNoBudget
		}
		if _, err := io.ReadFull(body, buf[:blen]); err != nil {
			f.budget.Put(buf)
			return i, i > from, true, fmt.Errorf("prefetch: read %s block %d: %w", k.Key, fl.key.idx, err)
		}
		f.stats.FetchedBytes[prio].Add(blen)
		data := buf[:blen]
		// Marked before the block is handed over or present, so a reader
		// that finds it present sees the mark, and a waiter (which takes
		// it) leaves none behind.
		if t.warm {
			o.TakePrefetched(fl.key.idx) // a stale mark of a block fetched before and dropped
		} else {
			o.MarkPrefetched(fl.key.idx)
		}
		f.publish(fl, data, nil)
		if werr := o.WriteBlock(fl.key.idx, data); werr != nil {
			f.stats.UncachedBlocks.Add(1)
			if !errors.Is(werr, cache.ErrNoSpace) {
				f.log.Warn("prefetch: caching block", "key", k.Key, "block", fl.key.idx, "err", werr)
			}
		}
		f.retire(fl)
	}
	return i, i > from, true, nil
}
