package meta

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// smallListing is the size up to which a listing found in the index is
// loaded into memory at once rather than read from the index per lookup.
const smallListing = 4096

// dirState is what the cache knows of one directory.
type dirState struct {
	dir string

	mu        sync.Mutex // guards below
	cur       *listing   // last complete listing (possibly stale), or nil
	loading   *listing   // listing being fetched, or nil
	triedDisk bool       // the index was consulted for cur
	// diskRead is closed when the caller that consults the index for cur
	// is done; callers arriving meanwhile wait for it rather than find
	// nothing and ask the backend.
	diskRead chan struct{}

	lruElem any // *list.Element in Cache.lru; guarded by Cache.mu

	// persistMu orders the index writes of overlapping loads (the one
	// place a lock is held across disk I/O: it serialises nothing but
	// this directory's persistence, never a reader).
	persistMu   sync.Mutex
	persistedAt int64 // fetchedAt of the listing last written to the index

	// mutatedAt is when a local edit (Upsert, Remove, Invalidate) last
	// touched this directory; guarded by mu. A prefetched listing that
	// started before it may miss the edit and is not installed.
	mutatedAt int64
	// edits are the local edits made while a load was in flight; guarded
	// by mu. The load that ends applies those made after it started: its
	// pages may have been listed before them (a file whose upload landed
	// meanwhile would be missing until the TTL ran out).
	edits []dirEdit

	// resume is where a failed load stopped (resume.go); guarded by mu.
	resume *resumePoint

	// unwalked: loading this directory started a prefetch of its
	// subtrees, and no directory under it was read since; the next load
	// starts none (a directory listed again and again, its subtrees never
	// walked, has them listed once, not at every expiry).
	unwalked atomic.Bool
}

// dirEdit is one local edit of a directory: name set to *e, or removed.
type dirEdit struct {
	name string
	e    *Entry
	at   int64
}

// listing is one generation of a directory's contents. While loading it
// grows page by page; once done it never changes. An indexed listing keeps
// no entries in memory and reads them from the index.
type listing struct {
	mu        sync.Mutex
	entries   []Entry
	byName    map[string]int
	done      bool
	err       error
	fetchedAt int64
	// started: when its load began (a resumed one: the load it resumes),
	// which its entries are as old as while it loads (Cache.LookupLease).
	started int64
	changed chan struct{} // closed (and replaced) when entries or done change

	// edited is the listing made current in its place, with the local
	// edits made while it loaded (dirState.edits); set before it is done.
	// Its readers show those edits too.
	edited *listing

	indexed   bool        // entries live in the index only
	count     int64       // entries, for indexed listings
	persisted atomic.Bool // its entries are in the index
}

func newListing() *listing {
	return &listing{byName: map[string]int{}, changed: make(chan struct{})}
}

func (l *listing) appendBatch(es []Entry) {
	if len(es) == 0 {
		return
	}
	l.mu.Lock()
	for _, e := range es {
		l.byName[e.Name] = len(l.entries)
		l.entries = append(l.entries, e)
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// completeAt reports whether a loading listing has finished successfully
// and is still fresh: then it answers negative lookups too.
func (l *listing) completeAt(c *Cache) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done && l.err == nil && c.fresh(l.fetchedAt)
}

func (l *listing) finish(err error, fetchedAt int64) {
	l.mu.Lock()
	l.done, l.err, l.fetchedAt = true, err, fetchedAt
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// addedWhileLoading returns the entries the local edits made during l's
// load added, which l's own pages may not show.
func (l *listing) addedWhileLoading() []Entry {
	l.mu.Lock()
	ed := l.edited
	var out []Entry
	if ed != nil {
		for _, e := range ed.entries { // immutable: it never changes once made
			if _, ok := l.byName[e.Name]; !ok {
				out = append(out, e)
			}
		}
	}
	l.mu.Unlock()
	return out
}

// markDone ends a load whose age was set before it could become current:
// fetchedAt is not written again (it is read under the directory's lock
// alone once the listing is current).
func (l *listing) markDone() {
	l.mu.Lock()
	l.done = true
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// find looks name up in an in-memory listing (complete or partial).
func (l *listing) find(name string) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.byName[name]; ok {
		return l.entries[i], true
	}
	return Entry{}, false
}

func (c *Cache) dir(dir string) *dirState {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := c.dirs[dir]
	if ds == nil {
		ds = &dirState{dir: dir}
		c.dirs[dir] = ds
	}
	return ds
}

// current returns the directory's last complete listing, reading its
// header (and, if small, its entries) from the index the first time.
func (ds *dirState) current(c *Cache) *listing {
	ds.mu.Lock()
	if ds.cur == nil && ds.diskRead != nil {
		// Another caller is reading the index right now (the first
		// lookups after a restart come many at a time).
		wait := ds.diskRead
		ds.mu.Unlock()
		<-wait
		ds.mu.Lock()
	}
	if ds.cur != nil || ds.triedDisk {
		cur := ds.cur
		ds.mu.Unlock()
		return cur
	}
	ds.triedDisk = true
	read := make(chan struct{})
	ds.diskRead = read
	ds.mu.Unlock()
	defer func() {
		ds.mu.Lock()
		ds.diskRead = nil
		ds.mu.Unlock()
		close(read)
	}()

	hdr, ok, err := c.ix.GetDir(c.tag, ds.dir)
	if err != nil || !ok || !hdr.Complete {
		return nil
	}
	l := &listing{done: true, fetchedAt: hdr.FetchedAt, indexed: true, count: hdr.Entries, changed: make(chan struct{})}
	l.persisted.Store(true)
	if hdr.Entries <= smallListing {
		mem := newListing()
		var es []Entry
		err := c.ix.ScanListing(c.tag, ds.dir, func(name string, r index.EntryRecord) error {
			es = append(es, fromRecord(name, r))
			return nil
		})
		if err == nil {
			mem.appendBatch(es)
			mem.done, mem.fetchedAt = true, hdr.FetchedAt
			mem.persisted.Store(true)
			l = mem
		}
	}
	ds.mu.Lock()
	if ds.cur == nil {
		ds.cur = l
	}
	l = ds.cur
	ds.mu.Unlock()
	if !l.indexed {
		c.account(ds, l)
	}
	return l
}

// lookupCached answers from a fresh listing, a listing being loaded or a
// fresh point lookup, with when the answer was fetched (at); answered is
// false when only the backend can tell.
func (ds *dirState) lookupCached(c *Cache, name string) (e Entry, found bool, at int64, answered bool) {
	if cur := ds.current(c); cur != nil && c.fresh(cur.fetchedAt) {
		e, found := c.findIn(ds, cur, name)
		return e, found, cur.fetchedAt, true
	}
	ds.mu.Lock()
	loading := ds.loading
	ds.mu.Unlock()
	if loading != nil {
		if e, found, ok := ds.editedDuring(loading, name); ok {
			return e, found, loading.fetched(), true
		}
		if e, ok := loading.find(name); ok {
			return e, true, loading.fetched(), true
		}
		if loading.completeAt(c) {
			return Entry{}, false, loading.fetched(), true
		}
	}
	if p, ok := c.point(ds.dir + name); ok && c.fresh(p.fetchedAt) {
		return p.e, p.exists, p.fetchedAt, true
	}
	return Entry{}, false, 0, false
}

// editedDuring returns the newest local edit of name made while l loads
// (dirState.edits): l's pages may have been listed before it, and the
// load applies it only as it ends. found is false for a removal.
func (ds *dirState) editedDuring(l *listing, name string) (e Entry, found, ok bool) {
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for i := len(ds.edits) - 1; i >= 0; i-- {
		ed := ds.edits[i]
		if ed.name != name || ed.at < started {
			continue
		}
		if ed.e == nil {
			return Entry{}, false, true
		}
		return *ed.e, true, true
	}
	return Entry{}, false, false
}

// findIn looks name up in a complete listing.
func (c *Cache) findIn(ds *dirState, l *listing, name string) (Entry, bool) {
	if !l.indexed {
		c.touch(ds)
		return l.find(name)
	}
	r, ok, err := c.ix.GetEntry(c.tag, ds.dir, name)
	if err != nil || !ok {
		return Entry{}, false
	}
	return fromRecord(name, r), true
}

// startLoad returns the directory's listing in progress, starting one if
// none is running.
func (c *Cache) startLoad(ds *dirState) *listing {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if l := ds.loading; l != nil {
		l.mu.Lock()
		reusable := !l.done || (l.err == nil && c.fresh(l.fetchedAt))
		l.mu.Unlock()
		if reusable {
			return l
		}
	}
	l := newListing()
	l.started = c.now().UnixNano()
	ds.loading = l
	c.loads.Add(1)
	go c.load(ds, l)
	return l
}

// load fetches a whole listing page by page, publishing each page to
// readers, then makes it current and persists it. It goes on from where
// a failed load of the directory stopped, when that one may be resumed
// (resume.go).
func (c *Cache) load(ds *dirState, l *listing) {
	defer c.loads.Done()
	ctx := c.ctx
	var batch []Entry
	emit := func(e Entry) { batch = append(batch, e) }
	rp := ds.takeResume(c)
	if rp != nil {
		rp.m.emit = emit
		l.mu.Lock()
		l.started = rp.started // its first pages are that old
		l.mu.Unlock()
		l.appendBatch(rp.entries)
	} else {
		rp = &resumePoint{m: newMerger(ds.dir, emit, c.skipKey, c.shadowKey), started: c.now().UnixNano()}
	}
	m := rp.m
	var err error
	token := rp.token
	for {
		var page backend.ListPage
		page, err = c.listPage(ctx, ds.dir, token)
		if err != nil {
			err = fmt.Errorf("meta: list %q: %w", ds.dir, err)
			break
		}
		m.page(page)
		if page.Next == "" {
			m.end()
		}
		l.appendBatch(batch)
		batch = batch[:0]
		if page.Next == "" {
			break
		}
		token = page.Next
	}
	if err != nil {
		keep := ctx.Err() == nil && token != "" // not closing, and past the first page
		if keep {
			rp.token, rp.entries = token, l.published()
			keep = c.holdResume(len(rp.entries))
		}
		ds.mu.Lock()
		if ds.loading == l {
			ds.loading = nil
		}
		if ds.loading == nil {
			ds.edits = nil
		}
		if keep {
			ds.resume = rp
		}
		ds.mu.Unlock()
		l.finish(err, 0)
		return
	}
	fetched := c.now().UnixNano()
	if rp.entries != nil {
		fetched = rp.started // its first pages are that old
	}
	// Its subtrees are queued before readers see the end of the listing,
	// so that a walk going on from here finds them queued (splitwait.go).
	// The entries are complete: they no longer change.
	c.prefetch(ds.dir, l.entries)
	// Its age before it can become current (readers of ds.cur read it
	// under ds.mu alone); it is marked done only after, once the edits
	// made meanwhile are in l.edited for its readers.
	l.mu.Lock()
	l.fetchedAt = fetched
	l.mu.Unlock()

	ds.mu.Lock()
	if ds.loading == l {
		ds.loading = nil
	}
	cur := l
	for _, ed := range ds.edits {
		if ed.at >= rp.started {
			cur = cur.with(ed.name, ed.e)
		}
	}
	if ds.loading == nil {
		ds.edits = nil
	}
	if cur != l { // not shared yet
		cur.fetchedAt = fetched
		l.mu.Lock()
		l.edited = cur
		l.mu.Unlock()
	}
	old := ds.cur
	newer := old == nil || old.fetchedAt <= fetched
	if newer {
		ds.cur = cur
	}
	ds.mu.Unlock()
	l.markDone() // readers have it all now
	if !newer {
		return
	}
	// Two loads of one directory can overlap (a refresh started while the
	// previous one persists); persistMu keeps their writes in order and
	// the older one never replaces the newer.
	ds.persistMu.Lock()
	defer ds.persistMu.Unlock()
	if ds.persistedAt > fetched {
		return
	}
	// A mutation (Upsert, Remove) may have replaced l by an edited copy
	// since it became current; mutations write the index under persistMu
	// too, so what is current now is what the index must hold.
	src := l
	ds.mu.Lock()
	if cur := ds.cur; cur != nil && cur != l && !cur.indexed && cur.fetchedAt == fetched {
		src = cur
	}
	ds.mu.Unlock()
	src.mu.Lock()
	rows := named(src.entries)
	src.mu.Unlock()
	if err := c.ix.ReplaceListing(c.tag, ds.dir, dirRecord(fetched, len(rows)), rows); err != nil {
		c.log.Warn("meta: saving listing", "dir", ds.dir, "err", err)
		return
	}
	ds.persistedAt = fetched
	// Only now may they be demoted to the index copy.
	l.persisted.Store(true)
	src.persisted.Store(true)
	c.replaced(ds, old, l)
}

// listPage fetches one page of dir's listing, unless the backend is known
// to be down (the breaker answers with its error at once).
func (c *Cache) listPage(ctx context.Context, dir, token string) (backend.ListPage, error) {
	sent, err := c.allowBackend()
	if err != nil {
		return backend.ListPage{}, err
	}
	page, err := c.listWatched(ctx, dir, backend.ListOptions{Token: token})
	c.backendDone(sent, err)
	return page, err
}

// ListAhead starts listing dir now (or joins the load of it under way),
// unless a fresh listing of it is cached, and returns a wait for that
// listing: its load's error, or ctx's. A mkdir lists its new directory
// beside the put of its marker, so that the creates that follow in it
// are answered from that listing instead of one request per name.
func (c *Cache) ListAhead(dir string) (wait func(ctx context.Context) error) {
	ds := c.dir(dir)
	if cur := ds.current(c); cur != nil && c.fresh(cur.fetchedAt) {
		return func(context.Context) error { return nil }
	}
	l := c.startLoad(ds)
	return l.wait
}

// wait blocks until the listing is loaded (its error) or ctx ends.
func (l *listing) wait(ctx context.Context) error {
	for {
		l.mu.Lock()
		done, err, ch := l.done, l.err, l.changed
		l.mu.Unlock()
		if done {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
