package meta

import (
	"strings"

	"github.com/stratafs/strata/cache/index"
)

// The write path tells the cache what it changed, so that lookups and
// listings show it at once (and across restarts) instead of after the
// TTL. Listings are copied on write: readers streaming the old one keep a
// consistent view.

// SetLocal shows e in dir while it exists only locally (written, not yet
// uploaded): it wins over the bucket's listings until ClearLocal.
func (c *Cache) SetLocal(dir string, e Entry) {
	c.mu.Lock()
	m := c.local[dir]
	if m == nil {
		m = map[string]Entry{}
		c.local[dir] = m
	}
	m[e.Name] = e
	c.mu.Unlock()
}

// ClearLocal ends the local override of name in dir.
func (c *Cache) ClearLocal(dir, name string) {
	c.mu.Lock()
	if m := c.local[dir]; m != nil {
		delete(m, name)
		if len(m) == 0 {
			delete(c.local, dir)
		}
	}
	c.mu.Unlock()
}

// MoveLocal moves the local override of name in dir, if there is one, to
// newName in newDir (a renamed directory's file whose upload is pending).
func (c *Cache) MoveLocal(dir, name, newDir, newName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.local[dir][name]
	if !ok {
		return
	}
	delete(c.local[dir], name)
	if len(c.local[dir]) == 0 {
		delete(c.local, dir)
	}
	m := c.local[newDir]
	if m == nil {
		m = map[string]Entry{}
		c.local[newDir] = m
	}
	e.Name = newName
	m[newName] = e
}

// localEntries returns dir's local overrides.
func (c *Cache) localEntries(dir string) []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Entry, 0, len(c.local[dir]))
	for _, e := range c.local[dir] {
		out = append(out, e)
	}
	return out
}

// Upsert records that e now exists in dir in the bucket.
func (c *Cache) Upsert(dir string, e Entry) {
	c.unhideUpserted(dir + e.Name)
	c.mutate(dir, e.Name, &e)
}

// Remove records that name no longer exists in dir.
func (c *Cache) Remove(dir, name string) {
	c.mutate(dir, name, nil)
}

// Invalidate forgets dir's listing; the next use fetches it again.
func (c *Cache) Invalidate(dir string) {
	ds := c.dir(dir)
	ds.mu.Lock()
	old := ds.cur
	ds.cur, ds.triedDisk = nil, true
	ds.mutatedAt = c.now().UnixNano()
	ds.mu.Unlock()
	c.replaced(ds, old, nil)
	if err := c.ix.DeleteListing(c.tag, dir); err != nil {
		c.log.Warn("meta: invalidating listing", "dir", dir, "err", err)
	}
}

// mutate sets (e != nil) or removes (e == nil) name in dir's cached
// listing, its index copy and the point lookups.
func (c *Cache) mutate(dir, name string, e *Entry) {
	key := dir + name
	now := c.now().UnixNano()
	p := pointResult{fetchedAt: now}
	rec := index.EntryRecord{Kind: index.KindAbsent, FetchedAt: now}
	if e != nil {
		p.e, p.exists = *e, true
		rec = toRecord(*e)
		rec.FetchedAt = now
	}
	c.remember(key, p)
	if err := c.ix.PutStat(c.tag, key, rec); err != nil {
		c.log.Warn("meta: saving lookup", "key", key, "err", err)
	}

	ds := c.dir(dir)
	// A listing an earlier run kept in the index is read first, so that
	// the edit reaches it: edited there unread, it came back without the
	// edit at the directory's first use (an upload the journal resumed,
	// landing at mount).
	ds.current(c)
	ds.mu.Lock()
	old := ds.cur
	ds.mutatedAt = now
	if ds.loading != nil { // applied by the load as it ends (dirState.edits)
		ds.edits = append(ds.edits, dirEdit{name: name, e: e, at: now})
	}
	var next *listing
	if old != nil && !old.indexed {
		next = old.with(name, e)
		ds.cur = next
	}
	ds.mu.Unlock()
	if next != nil {
		c.replaced(ds, old, next)
	}
	if old == nil {
		return // a first load in flight persists the edit with its listing
	}
	// In order with a load persisting the listing this edits (see load).
	ds.persistMu.Lock()
	var err error
	if e != nil {
		err = c.ix.PutEntry(c.tag, dir, name, toRecord(*e))
	} else {
		err = c.ix.DeleteEntry(c.tag, dir, name)
	}
	ds.persistMu.Unlock()
	if err != nil {
		c.log.Warn("meta: saving listing change", "dir", dir, "name", name, "err", err)
	}
}

// with returns a copy of a complete in-memory listing with name set to e
// (or removed when e is nil).
func (l *listing) with(name string, e *Entry) *listing {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := &listing{done: true, fetchedAt: l.fetchedAt, changed: make(chan struct{}), byName: make(map[string]int, len(l.entries)+1)}
	n.persisted.Store(l.persisted.Load())
	n.entries = make([]Entry, 0, len(l.entries)+1)
	for _, x := range l.entries {
		if x.Name == name {
			continue
		}
		n.byName[x.Name] = len(n.entries)
		n.entries = append(n.entries, x)
	}
	if e != nil {
		n.byName[name] = len(n.entries)
		n.entries = append(n.entries, *e)
	}
	return n
}

// HasLocal reports whether anything written here and not yet uploaded
// lives under prefix.
func (c *Cache) HasLocal(prefix string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir, m := range c.local {
		if len(m) > 0 && strings.HasPrefix(dir, prefix) {
			return true
		}
	}
	return false
}

// InvalidatePrefix forgets every cached listing at or under prefix (after
// a directory rename, or a refresh), in memory and in the index (where
// listings of earlier runs are kept, not yet read by this one).
func (c *Cache) InvalidatePrefix(prefix string) {
	c.noteInvalidation(prefix, c.now().UnixNano())
	persisted, err := c.ix.DirsUnder(c.tag, prefix)
	if err != nil {
		c.log.Warn("meta: invalidating listings", "prefix", prefix, "err", err)
	}
	dirs := map[string]bool{}
	for _, d := range persisted {
		dirs[d] = true
	}
	c.mu.Lock()
	for d := range c.dirs {
		if strings.HasPrefix(d, prefix) {
			dirs[d] = true
		}
	}
	for k := range c.points {
		if strings.HasPrefix(k, prefix) {
			delete(c.points, k)
		}
	}
	c.mu.Unlock()
	for d := range dirs {
		c.Invalidate(d)
	}
	if err := c.ix.DeleteStatsUnder(c.tag, prefix); err != nil {
		c.log.Warn("meta: invalidating lookups", "prefix", prefix, "err", err)
	}
}

func named(es []Entry) []index.NamedEntry {
	out := make([]index.NamedEntry, len(es))
	for i, e := range es {
		out[i] = index.NamedEntry{Name: e.Name, Entry: toRecord(e)}
	}
	return out
}

func dirRecord(fetchedAt int64, n int) index.DirRecord {
	return index.DirRecord{FetchedAt: fetchedAt, Complete: true, Entries: int64(n)}
}

func toRecord(e Entry) index.EntryRecord {
	k := index.KindFile
	if e.Dir {
		k = index.KindDir
	}
	return index.EntryRecord{Kind: k, Size: e.Size, MTime: e.MTime, Version: e.Version}
}

func fromRecord(name string, r index.EntryRecord) Entry {
	return Entry{Name: name, Dir: r.Kind == index.KindDir, Size: r.Size, MTime: r.MTime, Version: r.Version}
}

// invalidation records an InvalidatePrefix, for prefetches running then.
type invalidation struct {
	prefix string
	at     int64
}

// maxInvalidations bounds the invalidations remembered; older ones fold
// into invalidFloor (everything before it counts as invalidated).
const maxInvalidations = 1024

func (c *Cache) noteInvalidation(prefix string, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.invalidations) >= maxInvalidations {
		half := len(c.invalidations) / 2
		c.invalidFloor = max(c.invalidFloor, c.invalidations[half-1].at)
		c.invalidations = append(c.invalidations[:0], c.invalidations[half:]...)
	}
	c.invalidations = append(c.invalidations, invalidation{prefix, at})
}

// invalidatedSince reports whether dir was invalidated at or after t.
func (c *Cache) invalidatedSince(dir string, t int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t <= c.invalidFloor {
		return true
	}
	for _, iv := range c.invalidations {
		if iv.at >= t && strings.HasPrefix(dir, iv.prefix) {
			return true
		}
	}
	return false
}
