package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// maxPoints bounds the point lookups remembered in memory; the index keeps
// them all.
const maxPoints = 100_000

// point returns a remembered point lookup of key, from memory or the index.
func (c *Cache) point(key string) (pointResult, bool) {
	c.mu.Lock()
	p, ok := c.points[key]
	c.mu.Unlock()
	if ok {
		return p, true
	}
	r, ok, err := c.ix.GetStat(c.tag, key)
	if err != nil || !ok {
		return pointResult{}, false
	}
	_, name := Parent(key)
	p = pointResult{e: fromRecord(name, r), exists: r.Kind != index.KindAbsent, fetchedAt: r.FetchedAt}
	// A local edit remembered while the index was read is newer.
	p, _ = c.rememberAnswer(key, p, r.FetchedAt)
	return p, true
}

func (c *Cache) remember(key string, p pointResult) {
	c.mu.Lock()
	if len(c.points) >= maxPoints {
		clear(c.points)
	}
	c.points[key] = p
	c.mu.Unlock()
}

// rememberAnswer remembers p, the backend's answer to a lookup of key
// asked at asked, unless a point newer than that question was remembered
// meanwhile (a local edit: mutate), which it returns instead.
func (c *Cache) rememberAnswer(key string, p pointResult, asked int64) (pointResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.points[key]; ok && cur.fetchedAt >= asked {
		return cur, false
	}
	if len(c.points) >= maxPoints {
		clear(c.points)
	}
	c.points[key] = p
	return p, true
}

// resaveIfEdited writes key's point to the index again if a local edit
// replaced p while p was being written: the edit's own write may have
// gone first, and the index must end with the newer one.
func (c *Cache) resaveIfEdited(key string, p pointResult) {
	c.mu.Lock()
	cur, ok := c.points[key]
	c.mu.Unlock()
	if !ok || cur.fetchedAt == p.fetchedAt && cur.exists == p.exists && cur.e == p.e {
		return
	}
	rec := index.EntryRecord{Kind: index.KindAbsent, FetchedAt: cur.fetchedAt}
	if cur.exists {
		rec = toRecord(cur.e)
		rec.FetchedAt = cur.fetchedAt
	}
	if err := c.ix.PutStat(c.tag, key, rec); err != nil {
		c.log.Warn("meta: saving lookup", "key", key, "err", err)
	}
}

// pointLookup asks the backend about one name: HEAD of the key and a
// one-entry LIST of key+"/" at the same time (a directory wins over a file
// of the same name). When the backend cannot be reached, a stale answer is
// better than none, but not to be kept (its lease is 0). It returns the
// answer's lease (see LookupLease).
func (c *Cache) pointLookup(ctx context.Context, dir, name string) (Entry, time.Duration, error) {
	key := dir + name
	// Like listing loads, a lookup is not cancelled with its caller: the
	// kernel interrupts a request whenever the calling thread gets a
	// signal (the Go runtime's SIGURG preemption included), and open() or
	// stat() would fail with EINTR. The backend's own timeouts bound it.
	// A name the cache knew (its answer expired) is being revalidated: its
	// content, if it was read, is cached already, and a HEAD will do.
	_, _, known := c.staleAnswer(dir, name)
	asked := c.now().UnixNano()
	info, isDir, isFile, err := c.probe(context.WithoutCancel(ctx), key, !known)
	if err != nil {
		if e, found, ok := c.staleAnswer(dir, name); ok {
			c.warnOnce("stale\x00"+key, "meta: backend unreachable; serving cached metadata past its TTL", "key", key, "err", err)
			if !found {
				return Entry{}, 0, backend.ErrNotExist
			}
			return e, 0, nil
		}
		return Entry{}, 0, fmt.Errorf("meta: lookup %q: %w", key, err)
	}

	p := pointResult{fetchedAt: c.now().UnixNano(), exists: isDir || isFile, e: probedEntry(name, info, isDir)}
	rec := index.EntryRecord{Kind: index.KindAbsent, FetchedAt: p.fetchedAt}
	if p.exists {
		rec = toRecord(p.e)
		rec.FetchedAt = p.fetchedAt
	}
	if newer, ok := c.rememberAnswer(key, p, asked); !ok {
		// A local edit (an upload landing, a delete) came while the
		// bucket answered: it is newer than the answer.
		p = newer
	} else {
		if err := c.ix.PutStat(c.tag, key, rec); err != nil {
			c.log.Warn("meta: saving lookup", "key", key, "err", err)
		}
		c.resaveIfEdited(key, p)
	}
	if !p.exists {
		return Entry{}, c.lease(p.fetchedAt), backend.ErrNotExist
	}
	return p.e, c.lease(p.fetchedAt), nil
}

// probe asks the backend about key: a HEAD (with head, a GET of its first
// bytes: heads.go) and a one-key LIST of key+"/" at once. A directory wins
// over a file of the same name (logged once).
func (c *Cache) probe(ctx context.Context, key string, head bool) (info backend.ObjectInfo, isDir, isFile bool, err error) {
	sent, err := c.allowBackend()
	if err != nil {
		return info, false, false, err
	}
	defer func() { c.backendDone(sent, err) }()
	type answer struct {
		info    backend.ObjectInfo
		statErr error
		page    backend.ListPage
		listErr error
	}
	// Both requests share one bound on their answer (answerWithin); the
	// pair is sent again beside itself while it has no answer (hedged).
	err = c.answerWithin(ctx, "lookup "+key, func(ctx context.Context) error {
		a := hedged(ctx, c.opts.ResponseTimeout/hedgeAttempts, func(ctx context.Context) answer {
			var a answer
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); a.info, a.statErr = c.stat(ctx, key, head) }()
			go func() {
				defer wg.Done()
				a.page, a.listErr = c.be.List(ctx, key+"/", backend.ListOptions{Limit: 1})
			}()
			wg.Wait()
			return a
		})
		info = a.info
		statErr, page, listErr := a.statErr, a.page, a.listErr
		isDir = listErr == nil && (len(page.Objects) > 0 || len(page.Prefixes) > 0)
		isFile = statErr == nil
		switch {
		case isDir:
			// Decided whatever HEAD said.
			if isFile {
				c.shadowKey(key)
			}
		case listErr != nil:
			return listErr
		case statErr != nil && !errors.Is(statErr, backend.ErrNotExist):
			return statErr
		}
		return nil
	})
	return info, isDir, isFile, err
}

// probedEntry is the entry a probe found (meaningless if it found none).
func probedEntry(name string, info backend.ObjectInfo, isDir bool) Entry {
	if isDir {
		return Entry{Name: name, Dir: true}
	}
	return Entry{Name: name, Size: info.Size, MTime: info.MTime.UnixNano(), Version: info.Version}
}

// Known returns what the cache holds of name in dir, fresh or not, with no
// backend request: what a refresh replaces.
func (c *Cache) Known(dir, name string) (Entry, bool) {
	e, found, ok := c.staleAnswer(dir, name)
	return e, found && ok
}

// staleAnswer finds name in whatever the cache has, fresh or not: the
// directory's listing or a point lookup of the name, whichever was fetched
// later. A lookup after the listing expired (a name put in the bucket
// since, or deleted) is newer news than the listing, and a local edit
// stamps a point as well, so it wins over the listing it edited.
func (c *Cache) staleAnswer(dir, name string) (Entry, bool, bool) {
	ds := c.dir(dir)
	cur := ds.current(c)
	p, havePoint := c.point(dir + name)
	if cur != nil && (!havePoint || cur.fetchedAt >= p.fetchedAt) {
		e, found := c.findIn(ds, cur, name)
		return e, found, true
	}
	if havePoint {
		return p.e, p.exists, true
	}
	return Entry{}, false, false
}

// Listed reports whether the cache holds a fresh complete listing of dir,
// with no backend request.
func (c *Cache) Listed(dir string) bool {
	cur := c.dir(dir).current(c)
	return cur != nil && c.fresh(cur.fetchedAt)
}
