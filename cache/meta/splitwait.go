package meta

import (
	"context"
	"strings"
	"time"
)

// A readdir of a directory inside a subtree being listed flat waits for
// the flat listing rather than racing it with a request of its own: a walk
// (ls -lR, an ImageFolder scan) that starts right after the listing of the
// directory above it would otherwise reach the subdirectories before the
// flat listing's first page is back, and list each of them itself, on a
// busy machine every one of them. The wait is short by construction: for
// the split's first page, or while the split is inside the directory (it
// is sealed when the split moves past it); a directory the split has not
// reached yet is listed the normal way at once.

// splitWait bounds the wait of one readdir for a split: a backend that
// is slow to answer the split is no faster at answering the readdir, but
// past this the readdir asks for itself.
const splitWait = 2 * time.Second

// split is one subtree queued or being listed flat. Guarded by
// prefetcher.mu.
type split struct {
	running bool
	ended   bool
	pages   int           // pages received and installed
	last    string        // the last key of the last page
	changed chan struct{} // closed and replaced at each page and at the end
}

func newSplit() *split { return &split{changed: make(chan struct{})} }

// end wakes the split's waiters for good. Called with prefetcher.mu held.
func (s *split) end() {
	if !s.ended {
		s.ended = true
		close(s.changed)
	}
}

// pageDone records a page whose directories are installed.
func (p *prefetcher) pageDone(s *split, lastKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.pages++
	s.last = lastKey
	close(s.changed)
	s.changed = make(chan struct{})
}

// worthWaiting returns what to wait on for dir: the change channel of a
// split strictly above dir that will install it soon (its first page is
// coming, or it is inside dir now), or nil.
func (p *prefetcher) worthWaiting(dir string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s *split
	for d, _ := Parent(dir); ; d, _ = Parent(d) {
		if s = p.pending[d]; s != nil || d == "" {
			break
		}
	}
	switch {
	case s == nil || s.ended:
		return nil
	case !s.running:
		// Queued: worth it only if an idle worker is about to take it.
		for i, r := range p.queue {
			if i >= p.running-p.busy {
				return nil
			}
			if p.pending[r] == s {
				return s.changed
			}
		}
		return nil
	case s.pages == 0 || strings.HasPrefix(s.last, dir):
		return s.changed
	}
	return nil
}

// awaitSplit waits, up to c.splitWait, while a split is about to install
// ds's listing, and returns when it is fresh or no split will install it
// soon (or ctx ends).
func (c *Cache) awaitSplit(ctx context.Context, ds *dirState) {
	if c.pf == nil || c.splitWait <= 0 || ds.dir == "" {
		return
	}
	var timeout <-chan time.Time
	for {
		if cur := ds.current(c); cur != nil && c.fresh(cur.fetchedAt) {
			return
		}
		ch := c.pf.worthWaiting(ds.dir)
		if ch == nil {
			return
		}
		if timeout == nil {
			t := time.NewTimer(c.splitWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		case <-c.ctx.Done():
			return
		}
	}
}
