package meta

// A directory listing that fails part way (the backend's own retries
// spent on one page: an outage, throttling) keeps what it read: the
// entries its readers were given, the merger's state and the page that
// failed. The next load of the directory goes on from that page instead
// of listing the first pages again, so a directory of millions of keys
// read again after an error costs only the pages it still lacks.
//
// It starts over instead when the first attempt is no longer fresh (the
// metadata TTL, measured from when that attempt started) or when a local
// edit or an invalidation touched the directory since. The listing it
// completes counts as fetched when the first attempt started: its first
// pages are that old. The entries kept for resumes count against
// Options.MaxEntries, apart from complete listings: a failure that would
// go past it is not kept, and that directory's next load starts over.
type resumePoint struct {
	m       *merger
	entries []Entry // what the failed load published, in order (nil: nothing to resume)
	token   string  // the page that failed
	started int64   // when the first attempt began (unix ns)
}

// takeResume returns the resume point a failed load left, if the next
// load may go on from it, and forgets it either way.
func (ds *dirState) takeResume(c *Cache) *resumePoint {
	ds.mu.Lock()
	rp := ds.resume
	ds.resume = nil
	mutated := ds.mutatedAt
	ds.mu.Unlock()
	if rp == nil {
		return nil
	}
	c.mu.Lock()
	c.resumeHeld -= len(rp.entries)
	c.mu.Unlock()
	if !c.fresh(rp.started) || mutated >= rp.started {
		return nil
	}
	if rp.entries == nil {
		rp.entries = []Entry{}
	}
	return rp
}

// holdResume reports whether n more entries may be kept for a resume, and
// counts them if so.
func (c *Cache) holdResume(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resumeHeld+n > c.opts.MaxEntries {
		return false
	}
	c.resumeHeld += n
	return true
}

// published returns the entries a finished listing published. They no
// longer change: the slice is shared, not copied.
func (l *listing) published() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries
}
