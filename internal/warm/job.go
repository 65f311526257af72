package warm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/prefetch"
)

// Progress is a warm job's state, streamed to the client while it
// runs and returned at the end.
type Progress struct {
	Listing     bool     `json:"listing"`      // still discovering objects
	Objects     int64    `json:"objects"`      // found so far
	Bytes       int64    `json:"bytes"`        // their size
	DoneObjects int64    `json:"done_objects"` // fully cached (or failed)
	DoneBytes   int64    `json:"done_bytes"`   // bytes cached of the objects found
	Skipped     int64    `json:"skipped"`      // bytes that were cached before the job
	Failed      int64    `json:"failed"`       // objects found that could not be warmed (of done_objects)
	FailedPaths int64    `json:"failed_paths"` // listed paths not found and directories that could not be listed (not objects)
	Elapsed     float64  `json:"elapsed_seconds"`
	CacheLimit  int64    `json:"cache_limit"`
	Errors      []string `json:"errors,omitempty"` // the first few failures
	Warning     string   `json:"warning,omitempty"`
}

// Warmed is how many of the objects found are now fully cached.
func (p Progress) Warmed() int64 { return p.DoneObjects - p.Failed }

// Fetched is what this job brought in from the origin.
func (p Progress) Fetched() int64 { return p.DoneBytes - p.Skipped }

// Request says what to warm, relative to the root of the source.
type Request struct {
	Prefix      string   // key prefix under the root ("" everything); need not end in "/"
	Paths       []string // files or directories, relative to the root (instead of Prefix)
	Concurrency int      // objects at once
}

// Job hydrates objects into a cache through the same metadata cache,
// store and fetcher a mount uses, so the keys, versions and cache entries
// are exactly the ones the mount will look for.
type Job struct {
	Meta   *meta.Cache
	Store  *cache.Store
	Fetch  *prefetch.Fetcher
	Source string // backend.String(): the cache identity of the source
	Root   string // key prefix of the source's root ("" or ending in "/")
	Req    Request

	// Stall bounds how long one object may go without a new block while
	// fetches fail or the cache refuses blocks, before it counts as failed
	// (0: 10 s).
	Stall time.Duration

	objects, bytes, doneObjects, doneBytes, skipped atomic.Int64
	failed, failedPaths                             atomic.Int64
	listing                                         atomic.Bool
	mu                                              sync.Mutex // guards errs
	errs                                            []string
}

const maxErrors = 10

// ErrCacheFull stops a warm: the cache refuses blocks because everything
// in it is pinned or its disk is full.
var ErrCacheFull = errors.New("the cache is full")

// ErrNothingToWarm: no object lies under the source and prefix asked for
// (a typo, or the name of one file), which would otherwise report
// "warmed 0 of 0 objects" and succeed.
var ErrNothingToWarm = errors.New("nothing to warm")

// fail records an object that could not be warmed.
func (j *Job) fail(msg string) {
	j.failed.Add(1)
	j.note(msg)
}

// failPath records a name that did not lead to objects: a listed path
// that does not exist, a directory that could not be listed.
func (j *Job) failPath(msg string) {
	j.failedPaths.Add(1)
	j.note(msg)
}

func (j *Job) note(msg string) {
	j.mu.Lock()
	if len(j.errs) < maxErrors {
		j.errs = append(j.errs, msg)
	}
	j.mu.Unlock()
}

func (j *Job) progress(start time.Time) Progress {
	j.mu.Lock()
	errs := append([]string(nil), j.errs...)
	j.mu.Unlock()
	p := Progress{
		Listing: j.listing.Load(), Objects: j.objects.Load(), Bytes: j.bytes.Load(),
		DoneObjects: j.doneObjects.Load(), DoneBytes: j.doneBytes.Load(), Skipped: j.skipped.Load(),
		Failed: j.failed.Load(), FailedPaths: j.failedPaths.Load(), Elapsed: time.Since(start).Seconds(), CacheLimit: j.Store.Limit(), Errors: errs,
	}
	if !p.Listing && p.Bytes > p.CacheLimit {
		p.Warning = fmt.Sprintf("%s to warm but the cache may hold %s: the least recently used data will be evicted", config.FormatBytes(p.Bytes), config.FormatBytes(p.CacheLimit))
	}
	return p
}

type item struct {
	key string
	e   meta.Entry
}

// Run warms everything the request names, reporting progress every
// quarter second. It returns the final progress; the error is non-nil
// when it was cancelled, the cache filled up, or some objects failed.
func (j *Job) Run(ctx context.Context, report func(Progress)) (Progress, error) {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if j.Stall == 0 {
		j.Stall = 10 * time.Second
	}
	items := make(chan item, 1024)
	j.listing.Store(true)
	go func() {
		defer close(items)
		defer j.listing.Store(false)
		j.discover(ctx, items)
	}()
	var wg sync.WaitGroup
	for range max(j.Req.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				if ctx.Err() != nil {
					continue // drain
				}
				err := j.hydrate(ctx, it)
				// Done before failed: a progress report never shows more
				// failed objects than done ones.
				j.doneObjects.Add(1)
				if err != nil {
					if errors.Is(err, ErrCacheFull) {
						cancel(err)
					}
					if ctx.Err() == nil || errors.Is(err, ErrCacheFull) {
						j.fail(fmt.Sprintf("%s: %v", strings.TrimPrefix(it.key, j.Root), err))
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			p := j.progress(start)
			if report != nil {
				report(p)
			}
			switch {
			case errors.Is(context.Cause(ctx), ErrCacheFull):
				return p, context.Cause(ctx)
			case ctx.Err() != nil:
				return p, fmt.Errorf("warm cancelled: %w", ctx.Err())
			case p.Failed > 0 || p.FailedPaths > 0:
				return p, fmt.Errorf("%s: %s", failureSummary(p), strings.Join(p.Errors, "; "))
			case p.Objects == 0 && len(j.Req.Paths) == 0:
				return p, j.nothingToWarm(ctx)
			}
			return p, nil
		case <-tick.C:
			if report != nil {
				report(j.progress(start))
			}
		}
	}
}

// nothingToWarm says that nothing lies under the source and prefix, and,
// when that prefix is the name of a file, how to warm the file.
func (j *Job) nothingToWarm(ctx context.Context) error {
	under := j.Root + j.Req.Prefix
	err := fmt.Errorf("%w: no object's key starts with %q (check SOURCE and --prefix)", ErrNothingToWarm, under)
	name := strings.TrimSuffix(under, "/")
	if name == "" {
		return err
	}
	dir, base := meta.Parent(name)
	if e, lerr := j.Meta.Lookup(ctx, dir, base); lerr == nil && !e.Dir {
		return fmt.Errorf("%w; %s is an object (a file, not a directory): to warm it, give its directory as SOURCE and its name in --from-list (echo %s | strata warm SOURCE --from-list -)", err, name, base)
	}
	return err
}

// failureSummary says what could not be warmed, objects and paths apart.
func failureSummary(p Progress) string {
	var parts []string
	if p.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d objects could not be warmed (run warm again to resume)", p.Failed, p.Objects))
	}
	if p.FailedPaths > 0 {
		parts = append(parts, fmt.Sprintf("%d listed paths were not found or could not be listed", p.FailedPaths))
	}
	return strings.Join(parts, "; ")
}

// discover sends every file the request names.
func (j *Job) discover(ctx context.Context, out chan<- item) {
	if len(j.Req.Paths) == 0 {
		j.walk(ctx, j.Root, j.Root+j.Req.Prefix, out)
		return
	}
	for _, p := range j.Req.Paths {
		p = strings.Trim(p, "/")
		if p == "" {
			j.walk(ctx, j.Root, j.Root, out)
			continue
		}
		dir, name := meta.Parent(j.Root + p)
		e, err := j.Meta.Lookup(ctx, dir, name)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, backend.ErrNotExist):
			j.failPath(fmt.Sprintf("%s: not found", p))
		case err != nil:
			j.failPath(fmt.Sprintf("%s: %v", p, err))
		case e.Dir:
			d := meta.Join(dir, name, true)
			j.walk(ctx, d, d, out)
		default:
			j.send(ctx, out, item{key: meta.Join(dir, name, false), e: e})
		}
	}
}

func (j *Job) send(ctx context.Context, out chan<- item, it item) {
	j.objects.Add(1)
	j.bytes.Add(it.e.Size)
	select {
	case out <- it:
	case <-ctx.Done():
	}
}

// walk lists dir and everything below it, sending the files whose key
// starts with want (directories are entered only when they can hold one).
func (j *Job) walk(ctx context.Context, dir, want string, out chan<- item) {
	r := j.Meta.OpenDir(ctx, dir)
	var subdirs []string
	for {
		e, ok, err := r.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				j.failPath(fmt.Sprintf("listing %s: %v", strings.TrimPrefix(dir, j.Root)+"/", err))
			}
			break
		}
		if !ok {
			break
		}
		key := meta.Join(dir, e.Name, e.Dir)
		switch {
		case e.Dir && (strings.HasPrefix(key, want) || strings.HasPrefix(want, key)):
			subdirs = append(subdirs, key)
		case !e.Dir && strings.HasPrefix(key, want):
			j.send(ctx, out, item{key: key, e: e})
		}
	}
	for _, d := range subdirs {
		if ctx.Err() != nil {
			return
		}
		j.walk(ctx, d, want, out)
	}
}

// hydrate caches every block of one object, asking the fetcher to warm
// what is missing (background priority, within the memory budget) until
// the object is complete.
func (j *Job) hydrate(ctx context.Context, it item) error {
	o, err := j.Store.Acquire(cache.ObjectKey{Source: j.Source, Key: it.key, Version: it.e.Version, Size: it.e.Size, MTime: it.e.MTime})
	if err != nil {
		return err
	}
	defer o.Release()
	// Blocks a cache file cut short behind the cache's back no longer
	// holds are not cached: an fstat drops them, and they are fetched.
	if err := o.CheckFile(); err != nil {
		return fmt.Errorf("checking the cache file of %s: %w", it.key, err)
	}
	seen := o.CachedBytes()
	j.skipped.Add(seen)
	j.doneBytes.Add(seen)
	fst, sst := j.Fetch.Stats(), j.Store.Stats()
	lastMove := time.Now()
	errsAt, fullAt := fst.FetchErrors.Load(), sst.NoSpace.Load()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// Warm walks every block of the object under the fetcher's lock: call
	// it again only once the blocks it queued stopped arriving, and less
	// and less often while nothing arrives (a failing fetch is retried
	// after 20, 40, 80 ms ... then every second, not every tick).
	idle := 1
	for !o.Complete() {
		if idle > 0 && (idle&(idle-1) == 0 || idle%50 == 0) {
			j.Fetch.Warm(o)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now := o.CachedBytes()
		if now != seen {
			j.doneBytes.Add(now - seen)
			if now > seen {
				lastMove = time.Now()
				errsAt, fullAt = fst.FetchErrors.Load(), sst.NoSpace.Load()
			}
			seen = now
			idle = 0
			continue
		}
		idle++
		stalled := time.Since(lastMove)
		switch {
		case sst.NoSpace.Load() > fullAt && stalled > j.Stall/4:
			return fmt.Errorf("%w (%s used of %s): raise --cache-size or warm less", ErrCacheFull, config.FormatBytes(j.Store.Used()), config.FormatBytes(j.Store.Limit()))
		case fst.FetchErrors.Load() > errsAt && stalled > j.Stall:
			return fmt.Errorf("fetches keep failing (%d errors since the last block; see the log)", fst.FetchErrors.Load()-errsAt)
		case stalled > 60*j.Stall:
			return fmt.Errorf("no progress in %s", stalled.Round(time.Second))
		}
	}
	return nil
}
