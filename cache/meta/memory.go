package meta

import "container/list"

// Listings held in memory are counted against Options.MaxEntries; past it
// the least recently used ones are swapped for index-backed stand-ins
// (readers already streaming keep their copy until they finish).

// account adds a listing now held in memory.
func (c *Cache) account(ds *dirState, l *listing) {
	if l == nil || l.indexed {
		return
	}
	l.mu.Lock()
	n := len(l.entries)
	l.mu.Unlock()
	c.mu.Lock()
	c.inMem += n
	c.touchLocked(ds)
	victims := c.overLocked()
	c.mu.Unlock()
	c.demote(victims)
}

// replaced swaps the memory accounting of old for l.
func (c *Cache) replaced(ds *dirState, old, l *listing) {
	if old != nil && !old.indexed {
		old.mu.Lock()
		n := len(old.entries)
		old.mu.Unlock()
		c.mu.Lock()
		c.inMem -= n
		c.mu.Unlock()
	}
	c.account(ds, l)
}

func (c *Cache) touch(ds *dirState) {
	c.mu.Lock()
	c.touchLocked(ds)
	c.mu.Unlock()
}

func (c *Cache) touchLocked(ds *dirState) {
	if e, ok := ds.lruElem.(*list.Element); ok && e != nil {
		c.lru.MoveToFront(e)
		return
	}
	ds.lruElem = c.lru.PushFront(ds)
}

// overLocked pops least recently used directories until the entries held
// fit; the caller demotes them after dropping c.mu.
type victim struct {
	ds *dirState
	l  *listing // the listing un-counted; demoted only if still current
}

func (c *Cache) overLocked() []victim {
	var victims []victim
	for e := c.lru.Back(); c.inMem > c.opts.MaxEntries && e != nil; {
		ds := e.Value.(*dirState)
		prev := e.Prev()
		ds.mu.Lock()
		if cur := ds.cur; cur != nil && !cur.indexed && cur.persisted.Load() {
			c.lru.Remove(e)
			ds.lruElem = nil
			victims = append(victims, victim{ds, cur})
			cur.mu.Lock()
			c.inMem -= len(cur.entries)
			cur.mu.Unlock()
		}
		ds.mu.Unlock()
		e = prev
	}
	return victims
}

// demote replaces the in-memory listings of victims by index-backed ones.
func (c *Cache) demote(victims []victim) {
	for _, v := range victims {
		ds := v.ds
		ds.mu.Lock()
		if cur := ds.cur; cur == v.l {
			cur.mu.Lock()
			ix := &listing{done: true, fetchedAt: cur.fetchedAt, indexed: true, count: int64(len(cur.entries)), changed: make(chan struct{})}
			ix.persisted.Store(true)
			ds.cur = ix
			cur.mu.Unlock()
		}
		ds.mu.Unlock()
	}
}
