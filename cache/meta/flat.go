package meta

import (
	"fmt"
	"sync"

	"github.com/stratafs/strata/backend"
)

// Listing prefetch: when a directory is loaded from the backend, the
// subtrees of its subdirectories are listed in the background flat (no
// delimiter: 1000 keys a request whatever the tree's shape), one split per
// subdirectory, a bounded number at a time for the whole Cache, and every
// directory found inside is installed as a complete listing (flatBuilder),
// so that walking the tree (ls -lR, find, an ImageFolder scan) costs a few
// requests rather than one per directory.

const (
	// maxQueued bounds the subtrees waiting for a worker; more are not
	// prefetched (they load the normal way when used).
	maxQueued = 100_000
	// maxSplitKeys bounds the keys one split lists (cost): what it has
	// not reached by then loads the normal way.
	maxSplitKeys = 2_000_000
	// progressEvery is how often (in keys) a big split logs its progress.
	progressEvery = 100_000
	// maxPrefetchedDirs bounds the directories the prefetch installs in a
	// mount's life: each stays known to the Cache (a few hundred bytes),
	// and an ls of a huge bucket's root must not list it all. Past it the
	// prefetch stops; directories load the normal way.
	maxPrefetchedDirs = 100_000
)

// prefetcher queues subtrees to list flat and runs up to max at a time.
type prefetcher struct {
	max     int
	maxHeld int // entries a split may hold in open directories
	maxDirs int // directories it may install in all (maxPrefetchedDirs)

	mu      sync.Mutex // a leaf: no other lock is taken under it
	queue   []string
	running int               // workers
	busy    int               // workers listing a subtree (the others are picking one)
	pending map[string]*split // queued or running splits by root
	done    int               // splits finished (tests wait on it)
	dirs    int               // directories installed
	spent   bool              // dirs reached maxDirs: no more prefetch
}

// installedOne counts a directory installed and reports whether the
// prefetch may go on; the first time it may not, it empties the queue.
func (p *prefetcher) installedOne() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dirs++
	if p.dirs < p.maxDirs || p.spent {
		return !p.spent
	}
	p.spent = true
	p.dropQueue()
	return false
}

// covered reports whether dir lies in a subtree queued or being listed.
func (p *prefetcher) covered(dir string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for d := dir; d != ""; {
		if p.pending[d] != nil {
			return true
		}
		d, _ = Parent(d)
	}
	return false
}

// prefetch queues the subtrees of dir's subdirectories (those entries of
// a listing just loaded from the backend that are directories), unless
// dir is itself inside one being listed, or their listing is fresh.
func (c *Cache) prefetch(dir string, entries []Entry) {
	p := c.pf
	if p == nil || c.opts.TTL == 0 || c.ctx.Err() != nil || p.covered(dir) {
		return
	}
	ds := c.dir(dir)
	if ds.unwalked.Load() {
		return // its subtrees were listed and nobody went there
	}
	if c.enqueue(dir, entries) {
		ds.unwalked.Store(true)
	}
}

// noteWalked records that dir is being read: the directories above it
// are walked into, and their next loads prefetch again.
func (c *Cache) noteWalked(dir string) {
	if c.pf == nil || dir == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, _ := Parent(dir); ; d, _ = Parent(d) {
		if ds := c.dirs[d]; ds != nil {
			ds.unwalked.Store(false)
		}
		if d == "" {
			return
		}
	}
}

// enqueue queues the subtrees of dir's subdirectories among entries whose
// listing is not fresh, and starts workers for them; it reports whether
// it queued any. The caller holds a c.loads count (a load or a worker),
// so loads.Add is safe.
func (c *Cache) enqueue(dir string, entries []Entry) bool {
	p := c.pf
	var roots []string
	for _, e := range entries {
		if !e.Dir {
			continue
		}
		sub := dir + e.Name + "/"
		if cur := c.dir(sub).current(c); cur != nil && c.fresh(cur.fetchedAt) {
			continue
		}
		roots = append(roots, sub)
	}
	if len(roots) == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spent {
		return false
	}
	for _, r := range roots {
		if len(p.queue) >= maxQueued {
			break
		}
		if p.pending[r] == nil {
			p.pending[r] = newSplit()
			p.queue = append(p.queue, r)
		}
	}
	for ; p.running < p.max && p.running-p.busy < len(p.queue); p.running++ {
		c.loads.Add(1)
		go c.prefetchWorker()
	}
	return true
}

// drop empties the queue and returns how many subtrees it held.
func (p *prefetcher) drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.queue)
	p.dropQueue()
	return n
}

// dropQueue forgets the queued splits (their waiters go on without them).
// Called with p.mu held.
func (p *prefetcher) dropQueue() {
	for _, r := range p.queue {
		p.pending[r].end()
		delete(p.pending, r)
	}
	p.queue = nil
}

// idle reports whether workers would stand idle: then a big subtree is
// better split further.
func (p *prefetcher) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy+len(p.queue) < p.max
}

// prefetchWorker lists queued subtrees until the queue is empty.
func (c *Cache) prefetchWorker() {
	defer c.loads.Done()
	p := c.pf
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || c.ctx.Err() != nil {
			p.running--
			p.mu.Unlock()
			return
		}
		root := p.queue[0]
		p.queue[0] = ""
		p.queue = p.queue[1:]
		p.busy++
		s := p.pending[root]
		s.running = true
		p.mu.Unlock()

		c.listSubtree(root, s)

		p.mu.Lock()
		p.busy--
		s.end()
		delete(p.pending, root)
		p.done++
		p.mu.Unlock()
	}
}

// listSubtree lists root's subtree flat and installs every directory in
// it. A split cut short (an error, too many keys, Close) keeps what it
// sealed; the rest loads the normal way when used. s hears of each page.
func (c *Cache) listSubtree(root string, s *split) {
	start := c.now().UnixNano() // conservative: the listing is at least this old
	installed, spent := 0, false
	b := newFlatBuilder(root, func(dir string, es []Entry) {
		if !spent && c.installFlat(dir, es, start) {
			installed++
			if !c.pf.installedOne() {
				spent = true
				c.log.Info("meta: listing prefetch stopped: it listed as many directories as it may in a mount's life; the rest load per directory", "dirs", c.pf.maxDirs)
			}
		}
	}, c.skipKey, c.shadowKey)
	keys := 0
	var err error
	for token := ""; ; {
		var page backend.ListPage
		page, err = c.listFlatPage(root, token)
		if err != nil {
			err = fmt.Errorf("meta: list subtree %q: %w", root, err)
			break
		}
		for _, o := range page.Objects {
			b.add(o)
		}
		if n := len(page.Objects); n > 0 {
			c.pf.pageDone(s, page.Objects[n-1].Key)
		}
		before := keys
		keys += len(page.Objects)
		if keys/progressEvery != before/progressEvery {
			c.log.Info("meta: listing subtree", "prefix", root, "keys", keys, "dirs", installed)
		}
		if page.Next == "" {
			b.finish()
			break
		}
		// Fanning out costs a request per subdirectory: worth it when they
		// are big (the first page did not get through two of them), not
		// for many small ones a few pages list more cheaply.
		if token == "" && b.sealed <= 1 && c.pf.idle() && c.fanOut(root, start) {
			return // its subdirectories are listed by splits of their own
		}
		if spent {
			return
		}
		if b.held > c.pf.maxHeld || keys >= maxSplitKeys {
			err = fmt.Errorf("meta: list subtree %q: stopped after %d keys (%d held): the rest loads per directory", root, keys, b.held)
			break
		}
		token = page.Next
	}
	switch {
	case err != nil && backendGone(err):
		// The rest of the queue would fail the same way: drop it (each
		// directory loads the normal way when used).
		if n := c.pf.drop(); c.ctx.Err() == nil {
			c.log.Info("meta: backend unreachable; subtree listings dropped", "prefix", root, "queued", n, "err", err)
		}
	case err != nil && c.ctx.Err() == nil:
		c.log.Info("meta: subtree listing cut short", "prefix", root, "keys", keys, "dirs", installed, "err", err)
	case keys >= progressEvery:
		c.log.Info("meta: subtree listed", "prefix", root, "keys", keys, "dirs", installed)
	}
}

// fanOut splits the listing of a subtree that takes more than one page
// and whose subdirectories are big, while workers are idle: a delimited listing of root (one page, or it
// gives up) is installed, and each subdirectory not yet listed becomes a
// split of its own. It reports whether it did.
func (c *Cache) fanOut(root string, start int64) bool {
	page, err := c.listPage(c.ctx, root, "")
	if err != nil || page.Next != "" {
		return false
	}
	var es []Entry
	m := newMerger(root, func(e Entry) { es = append(es, e) }, c.skipKey, c.shadowKey)
	m.page(page)
	m.end()
	c.enqueue(root, es) // queued before a walk can see root's listing
	c.installFlat(root, es, start)
	return true
}

// listFlatPage fetches one page of a flat listing, unless the backend is
// known to be down.
func (c *Cache) listFlatPage(prefix, token string) (backend.ListPage, error) {
	sent, err := c.allowBackend()
	if err != nil {
		return backend.ListPage{}, err
	}
	page, err := c.listWatched(c.ctx, prefix, backend.ListOptions{Token: token, Recursive: true})
	c.backendDone(sent, err)
	return page, err
}

// installFlat makes es the complete listing of dir as of start (when the
// flat listing began), persisted like a load's, unless dir has something
// at least as recent: a listing loaded or being loaded since, a local
// edit (Upsert, Remove), an invalidation. It reports whether it did.
func (c *Cache) installFlat(dir string, es []Entry, start int64) bool {
	ds := c.dir(dir)
	ds.persistMu.Lock()
	defer ds.persistMu.Unlock()
	if !c.installable(ds, start) {
		return false
	}
	if err := c.ix.ReplaceListing(c.tag, dir, dirRecord(start, len(es)), named(es)); err != nil {
		c.log.Warn("meta: saving listing", "dir", dir, "err", err)
		return false
	}
	var l *listing
	if len(es) <= smallListing {
		l = newListing()
		l.appendBatch(es)
		l.done, l.fetchedAt = true, start
	} else {
		l = &listing{done: true, fetchedAt: start, indexed: true, count: int64(len(es)), changed: make(chan struct{})}
	}
	l.persisted.Store(true)
	// Checked again, and set under the same hold of ds.mu, against what
	// changed while it was written: a mutation does not wait for
	// persistMu when dir had no listing, and Invalidate never does.
	ok := !c.invalidatedSince(dir, start)
	ds.mu.Lock()
	old := ds.cur
	if ok = ok && ds.loading == nil && ds.mutatedAt < start && (old == nil || old.fetchedAt < start); ok {
		ds.cur, ds.triedDisk = l, true
	}
	ds.mu.Unlock()
	if !ok {
		// The index copy may miss the edit: drop it.
		if err := c.ix.DeleteListing(c.tag, dir); err != nil {
			c.log.Warn("meta: dropping listing", "dir", dir, "err", err)
		}
		return false
	}
	ds.persistedAt = start
	c.replaced(ds, old, l)
	return true
}

// installable reports whether nothing newer than start is known of ds.
// Called with ds.persistMu held.
func (c *Cache) installable(ds *dirState, start int64) bool {
	if ds.persistedAt >= start || c.invalidatedSince(ds.dir, start) {
		return false
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.loading != nil || ds.mutatedAt >= start {
		return false
	}
	return ds.cur == nil || ds.cur.fetchedAt < start
}
