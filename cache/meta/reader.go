package meta

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// Reader streams one directory's entries, blocking for pages still being
// fetched. Not safe for concurrent use (one per open directory handle).
type Reader struct {
	c    *Cache
	ds   *dirState
	l    *listing
	pos  int
	seen map[string]bool // names emitted before falling back to a stale listing
	last Entry           // the entry Next returned last

	// indexed listings: entries come from the index a chunk at a time.
	after string
	buf   []Entry
	eof   bool

	locals []Entry // local entries not in the listing, emitted after it (nil: not computed)
	// localsAt: the directory's local entries when the stream started.
	// Taken with the listing, not at its end: a file whose upload lands
	// meanwhile goes into a newer listing and out of the local entries,
	// and would be in neither this stream's.
	localsAt []Entry
}

// OpenDir starts reading directory dir: from a fresh cached listing, or
// from a listing being fetched (shared with concurrent readers).
func (c *Cache) OpenDir(ctx context.Context, dir string) *Reader {
	ds := c.dir(dir)
	c.noteWalked(dir)
	r := &Reader{c: c, ds: ds, localsAt: c.localEntries(dir)}
	if cur := ds.current(c); cur != nil && c.fresh(cur.fetchedAt) {
		r.l = cur
		return r
	}
	c.awaitSplit(ctx, ds)
	if cur := ds.current(c); cur != nil && c.fresh(cur.fetchedAt) {
		r.l = cur
		return r
	}
	r.l = c.startLoad(ds)
	return r
}

// Rewind starts the stream over (rewinddir), on the same listing.
func (r *Reader) Rewind() {
	r.pos, r.after, r.buf, r.eof, r.seen, r.locals = 0, "", nil, false, nil, nil
	r.localsAt = r.c.localEntries(r.ds.dir)
}

// Next returns the next entry, or ok false at the end.
func (r *Reader) Next(ctx context.Context) (e Entry, ok bool, err error) {
	for {
		if r.l.indexed {
			e, ok, err = r.nextIndexed()
		} else {
			e, ok, err = r.nextMem(ctx)
		}
		if err != nil {
			if r.fallback(err) {
				continue
			}
			return Entry{}, false, err
		}
		if ok {
			var live bool
			if e, live = r.newest(e); !live {
				continue // removed since the listing was made
			}
		}
		if !ok {
			// After the listing: files written here that it does not show.
			if r.locals == nil {
				r.locals = []Entry{}
				for _, le := range r.localsAt {
					if _, inListing := r.inListing(le.Name); !inListing {
						r.locals = append(r.locals, le)
					}
				}
				// And what was added while the listing loaded.
				for _, ae := range r.l.addedWhileLoading() {
					if !slices.ContainsFunc(r.locals, func(le Entry) bool { return le.Name == ae.Name }) {
						r.locals = append(r.locals, ae)
					}
				}
			}
			if len(r.locals) > 0 {
				e, ok = r.locals[0], true
				r.locals = r.locals[1:]
			}
		}
		if ok && r.seen != nil {
			if r.seen[e.Name] {
				continue
			}
			r.seen[e.Name] = true
		}
		if ok {
			r.last = e
		}
		return e, ok, nil
	}
}

// newest returns what is known now of e's name, which the stream's
// listing may show as it was when listed: a file written here (its local
// entry), an edit made while the listing loaded, or one made since
// (a newer copy of the listing, made by Upsert or Remove). READDIRPLUS
// gives the kernel these attributes, and a stale size would outlive the
// readdir. live is false for a name removed since.
func (r *Reader) newest(e Entry) (Entry, bool) {
	if le, local, hidden := r.c.overrideOf(r.ds.dir, e.Name); local {
		return le, true
	} else if hidden {
		return Entry{}, false // on its way out of the bucket (hidden.go)
	}
	if ne, found, ok := r.ds.editedDuring(r.l, e.Name); ok {
		return ne, found
	}
	r.l.mu.Lock()
	started := r.l.started
	r.l.mu.Unlock()
	r.ds.mu.Lock()
	cur := r.ds.cur
	r.ds.mu.Unlock()
	if cur == nil || cur == r.l || cur.indexed {
		return e, true
	}
	cur.mu.Lock()
	newer := cur.done && cur.fetchedAt >= started
	cur.mu.Unlock()
	if !newer {
		return e, true // an older listing still current while this one loads
	}
	return cur.find(e.Name)
}

func (r *Reader) nextMem(ctx context.Context) (Entry, bool, error) {
	l := r.l
	for {
		l.mu.Lock()
		if r.pos < len(l.entries) {
			e := l.entries[r.pos]
			r.pos++
			removed := false
			if ed := l.edited; ed != nil {
				_, kept := ed.byName[e.Name] // immutable once made
				removed = !kept
			}
			l.mu.Unlock()
			if removed {
				continue // removed while it loaded
			}
			return e, true, nil
		}
		if l.done {
			err := l.err
			l.mu.Unlock()
			return Entry{}, false, err
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Entry{}, false, ctx.Err()
		}
	}
}

func (r *Reader) nextIndexed() (Entry, bool, error) {
	if len(r.buf) == 0 && !r.eof {
		const chunk = 512
		n := 0
		err := r.c.ix.ScanListingFrom(r.c.tag, r.ds.dir, r.after, chunk, func(name string, rec index.EntryRecord) error {
			r.buf = append(r.buf, fromRecord(name, rec))
			n++
			return nil
		})
		if err != nil {
			return Entry{}, false, err
		}
		if n < chunk {
			r.eof = true
		}
	}
	if len(r.buf) == 0 {
		return Entry{}, false, nil
	}
	e := r.buf[0]
	r.buf = r.buf[1:]
	r.after = e.Name
	return e, true, nil
}

// fallback switches a reader whose fetch failed to the stale listing, if
// there is one and the failure was the backend's, remembering the names
// already emitted so none repeats.
func (r *Reader) fallback(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	r.ds.mu.Lock()
	stale := r.ds.cur
	r.ds.mu.Unlock()
	if stale == nil || stale == r.l || errors.Is(err, backend.ErrNoBucket) {
		return false
	}
	r.c.warnOnce("stale\x00"+r.ds.dir, "meta: backend unreachable; serving the cached listing past its TTL", "dir", r.ds.dir, "err", err)
	r.seen = map[string]bool{}
	if !r.l.indexed {
		r.l.mu.Lock()
		for _, e := range r.l.entries[:r.pos] {
			r.seen[e.Name] = true
		}
		r.l.mu.Unlock()
	}
	r.l, r.pos, r.after, r.buf, r.eof = stale, 0, "", nil, false
	return true
}

// Lookup finds name in the listing this reader streams (readdirplus asks
// for each entry it has just emitted), with the answer's lease: what is
// left of that listing's TTL (see Cache.LookupLease; 0 once the reader
// fell back to a stale listing).
func (r *Reader) Lookup(name string) (Entry, time.Duration, bool) {
	if e, local, hidden := r.c.overrideOf(r.ds.dir, name); local {
		return e, r.c.lease(r.c.now().UnixNano()), true
	} else if hidden {
		return Entry{}, 0, false
	}
	lease := r.c.lease(r.l.fetched())
	if r.last.Name == name && name != "" {
		return r.last, lease, true
	}
	e, ok := r.inListing(name)
	return e, lease, ok
}

// inListing finds name in the listing being streamed.
func (r *Reader) inListing(name string) (Entry, bool) {
	if !r.l.indexed {
		return r.l.find(name)
	}
	rec, ok, err := r.c.ix.GetEntry(r.c.tag, r.ds.dir, name)
	if err != nil || !ok {
		return Entry{}, false
	}
	return fromRecord(name, rec), true
}
