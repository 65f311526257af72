package meta

import (
	"container/list"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// Indefinite as a TTL means metadata never expires (immutable datasets).
const Indefinite time.Duration = -1

// Entry is one name in a directory.
type Entry struct {
	Name    string
	Dir     bool
	Size    int64
	MTime   int64 // unix nanoseconds
	Version string
	// Local marks a file written through this mount whose content is not
	// (yet) the bucket's: it lives in a staging file (set by SetLocal only).
	Local bool
}

// Options configure a Cache.
type Options struct {
	// TTL is how long fetched metadata is trusted: 0 revalidates every
	// time, Indefinite never.
	TTL time.Duration
	// MaxEntries bounds the listing entries held in memory; listings
	// beyond it are served from the index.
	MaxEntries int
	// ListPrefetch is how many subtrees are listed flat at a time in the
	// background when a directory with subdirectories is loaded (each
	// one list request at a time); 0 turns the prefetch off.
	ListPrefetch int
	// HeadBytes: a lookup not answered from a listing reads the object's
	// first HeadBytes bytes with its metadata (heads.go); 0 sends a HEAD.
	HeadBytes int64
	// ResponseTimeout bounds the wait for a lookup's answer (its HEAD and
	// one-key LIST, the backend's own retries included, sent again each
	// quarter of it without an answer: hedged) and for the
	// breaker's probe: a backend that has not answered by then is taken as
	// gone (ErrUnavailable, which opens the breaker). 0: only the
	// backend's own timeouts bound them. Listing pages are not bounded
	// by it (a page of a big directory can take long to come); one
	// unanswered for half a second is watched by a probe bounded by it
	// (listWatched).
	ResponseTimeout time.Duration
	Logger          *slog.Logger
	Clock           func() time.Time
}

// DefaultOptions: 60 s TTL, 250k entries in memory (about 50 MiB), 16
// subtrees listed at a time, 8 s for a lookup's answer (README: the first
// lookup that finds the endpoint gone fails within 10 s).
func DefaultOptions() Options {
	return Options{TTL: time.Minute, MaxEntries: 250_000, ListPrefetch: 16, ResponseTimeout: 8 * time.Second}
}

// Cache answers lookups and listings for one source.
type Cache struct {
	be   backend.Backend
	ix   *index.Index
	tag  index.SrcTag
	opts Options
	log  *slog.Logger
	now  func() time.Time

	// health fails lookups and listings fast while the backend is known
	// to be down (see backend.Breaker): a missing bucket or an endpoint
	// that stopped answering costs one wait, not one per path component.
	health *backend.Breaker
	// probing: the background probe (health.go) is running.
	probing atomic.Bool

	ctx    context.Context // cancelled by Close; background loads run under it
	cancel context.CancelFunc
	loads  sync.WaitGroup

	mu    sync.Mutex // guards dirs, lru, inMem, resumeHeld, points, warned, local, hidden, invalidations
	dirs  map[string]*dirState
	lru   *list.List // of *dirState holding entries in memory, most recent first
	inMem int        // entries held in memory by complete listings
	// resumeHeld: entries held by the resume points of failed loads
	// (resume.go), bounded by Options.MaxEntries as well.
	resumeHeld int
	points     map[string]pointResult
	warned     map[string]bool
	local      map[string]map[string]Entry // dir -> name -> entry written here, not yet in the bucket
	hidden     map[string]int              // key -> Hide calls not yet undone (hidden.go)

	invalidations []invalidation // recent InvalidatePrefix calls (see installFlat)
	invalidFloor  int64          // invalidations up to this time were forgotten

	heads heads // small objects' content read by lookups (heads.go)

	pf        *prefetcher   // nil when listing prefetch is off
	splitWait time.Duration // how long a readdir waits for a split (splitwait.go)
}

type pointResult struct {
	e         Entry
	exists    bool
	fetchedAt int64
}

// New returns a cache for the source be, persisting in ix.
func New(be backend.Backend, ix *index.Index, opts Options) *Cache {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		ctx: ctx, cancel: cancel,
		be: be, ix: ix, tag: index.TagFor(be.String()), opts: opts, log: opts.Logger, now: opts.Clock,
		dirs: map[string]*dirState{}, lru: list.New(), points: map[string]pointResult{}, warned: map[string]bool{},
		local:     map[string]map[string]Entry{},
		health:    backend.NewBreaker(healthCooldown, backendGone, opts.Clock),
		splitWait: splitWait,
		heads:     heads{m: map[string]headData{}},
	}
	if opts.ListPrefetch > 0 {
		c.pf = &prefetcher{max: opts.ListPrefetch, maxHeld: max(opts.MaxEntries, smallListing), maxDirs: maxPrefetchedDirs, pending: map[string]*split{}}
	}
	return c
}

// Close stops background listing loads and waits for them.
func (c *Cache) Close() {
	c.cancel()
	c.loads.Wait()
}

// fresh reports whether something fetched at t (unix ns) is still valid.
func (c *Cache) fresh(t int64) bool {
	switch {
	case t == 0:
		return false
	case c.opts.TTL < 0:
		return true
	case c.opts.TTL == 0:
		return false
	}
	return c.now().UnixNano()-t < int64(c.opts.TTL)
}

// lease is how much longer something fetched at t (unix ns) is trusted:
// Indefinite under an indefinite TTL, else what is left of the TTL (0
// once it expired). The kernel keeps an entry no longer than that (see
// LookupLease).
func (c *Cache) lease(t int64) time.Duration {
	if c.opts.TTL < 0 {
		return Indefinite
	}
	left := time.Duration(t + int64(c.opts.TTL) - c.now().UnixNano())
	return min(max(left, 0), c.opts.TTL)
}

// fetched is when what l holds was fetched, for its lease: fetchedAt, or
// while it loads (or after it failed) when its load began.
func (l *listing) fetched() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fetchedAt != 0 {
		return l.fetchedAt
	}
	return l.started
}

// warnOnce logs a message once per key (bounded, so a bucket of millions
// of bad keys cannot grow memory without end).
func (c *Cache) warnOnce(key, msg string, args ...any) {
	c.mu.Lock()
	if c.warned[key] || len(c.warned) > 100_000 {
		c.mu.Unlock()
		return
	}
	c.warned[key] = true
	c.mu.Unlock()
	c.log.Warn(msg, args...)
}

func (c *Cache) skipKey(key, reason string) {
	c.warnOnce("skip\x00"+key, "meta: key skipped: not a valid POSIX name", "key", key, "reason", reason)
}

func (c *Cache) shadowKey(key string) {
	c.warnOnce("shadow\x00"+key, "meta: file hidden by a directory of the same name", "key", key)
}

// Join returns the key of name in dir (with a trailing "/" for dirs).
func Join(dir, name string, isDir bool) string {
	if isDir {
		return dir + name + "/"
	}
	return dir + name
}

// Parent splits a key into its directory prefix and name.
func Parent(key string) (dir, name string) {
	k := strings.TrimSuffix(key, "/")
	i := strings.LastIndexByte(k, '/')
	return k[:i+1], k[i+1:]
}

// Lookup finds name in directory dir. A missing name is backend.ErrNotExist.
func (c *Cache) Lookup(ctx context.Context, dir, name string) (Entry, error) {
	e, _, err := c.LookupLease(ctx, dir, name)
	return e, err
}

// LookupLease is Lookup, and how long its answer may be kept without
// asking again: what is left of the TTL of the listing or point lookup it
// came from (0 for a stale answer, Indefinite under an indefinite TTL).
// It bounds the kernel's entry and attribute timeouts: were they a whole
// TTL, an entry answered from a listing about to expire, and renewed by
// every readdirplus of it, would outlive the listing by up to a TTL.
func (c *Cache) LookupLease(ctx context.Context, dir, name string) (Entry, time.Duration, error) {
	if e, local, hidden := c.overrideOf(dir, name); local {
		// Written here: nothing in the bucket for it to go stale against.
		return e, c.lease(c.now().UnixNano()), nil
	} else if hidden {
		return Entry{}, 0, backend.ErrNotExist // on its way out of the bucket
	}
	ds := c.dir(dir)
	if e, found, at, answered := ds.lookupCached(c, name); answered {
		if !found {
			return Entry{}, c.lease(at), backend.ErrNotExist
		}
		return e, c.lease(at), nil
	}
	return c.pointLookup(ctx, dir, name)
}
