package fs

import "sync"

// go-fuse registers a backing file at an inode's first passthrough open
// and reuses that registration for every passthrough open of the inode
// until its count of them drops to zero. It drops its count after the
// node's Release returns, so for a moment after the last passthrough
// handle of a node is released here (ptOpen 0) go-fuse still holds the
// old registration, and an open in that moment that asks for a new
// backing file (new content: a commit, a truncation, a discarded upload)
// is handed the old one: the kernel then reads, and a writer writes, the
// old file. That was a read right after `open(O_TRUNC)` and close beside
// a reader that had just closed returning the old bytes.
//
// backingHolds tracks, from go-fuse's own Register and Unregister calls
// (kernelCalls), which nodes it holds a registration for, so that such an
// open is served from userspace instead. go-fuse makes those calls with
// its backing lock held, right after it asks a handle for its descriptor
// (PassthroughFd, which names the node: asking), so the registration
// that follows is that node's.

// backingHolds is which nodes go-fuse holds a backing registration for.
type backingHolds struct {
	mu    sync.Mutex
	asked *fileNode // whose descriptor go-fuse asked for last
	byID  map[int32]holders
	held  map[*fileNode]int32
	// freed are closed when their node's registration is let go, for an
	// open waiting for it (awaitBackingFreeLocked).
	freed map[*fileNode]chan struct{}
}

// holders are the nodes of one registration: one, unless reusedBacking
// handed the same file's registration to another node while in use (no
// allocation for the one: this runs at every first open of a file).
type holders struct {
	first *fileNode
	more  []*fileNode
}

func newBackingHolds() *backingHolds {
	return &backingHolds{byID: map[int32]holders{}, held: map[*fileNode]int32{}, freed: map[*fileNode]chan struct{}{}}
}

// asking: go-fuse asks n's handle for a descriptor to register.
func (b *backingHolds) asking(n *fileNode) {
	b.mu.Lock()
	b.asked = n
	b.mu.Unlock()
}

// registered: go-fuse's registration of the node it just asked is id
// (ok false: it failed, and nothing is held).
func (b *backingHolds) registered(id int32, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.asked
	b.asked = nil
	if !ok || n == nil {
		return
	}
	if h, shared := b.byID[id]; shared {
		h.more = append(h.more, n)
		b.byID[id] = h
	} else {
		b.byID[id] = holders{first: n}
	}
	b.held[n] = id
}

// unregistered: go-fuse let id go. A registration two nodes share (the
// same cache file, open under both) lets both go: the other's own release
// is then not waited for, which matters only if it changes content
// meanwhile.
func (b *backingHolds) unregistered(id int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.byID[id]
	b.letGo(h.first, id)
	for _, n := range h.more {
		b.letGo(n, id)
	}
	delete(b.byID, id)
}

// letGo forgets that n holds id, unless n holds another registration
// since. Caller holds b.mu.
func (b *backingHolds) letGo(n *fileNode, id int32) {
	if n != nil && b.held[n] == id {
		delete(b.held, n)
		if c, ok := b.freed[n]; ok {
			close(c)
			delete(b.freed, n)
		}
	}
}

// holds reports whether go-fuse still holds a registration for n.
func (b *backingHolds) holds(n *fileNode) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.held[n]
	return ok
}

// whenFree returns a channel closed when go-fuse lets go of n's
// registration, or nil if it holds none.
func (b *backingHolds) whenFree(n *fileNode) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[n]; !ok {
		return nil
	}
	c, ok := b.freed[n]
	if !ok {
		c = make(chan struct{})
		b.freed[n] = c
	}
	return c
}

// backingFreeLocked reports, for an open that would hand the kernel a
// backing file of its own (no passthrough handle of n is open), whether
// go-fuse has let go of the node's previous registration; if not, the
// open must not be passthrough (go-fuse would give it that one). Caller
// holds n.mu, so that no passthrough open of n starts meanwhile.
func (n *fileNode) backingFreeLocked() bool {
	return !n.fsys.holds.holds(n)
}

// awaitBackingFreeLocked waits, up to releaseWait, for go-fuse to let go
// of the registration of a node nobody has open: the open that asks is
// one that overtook the last RELEASE (a read right after a save's
// close), and go-fuse lets go right after that Release returns. Without
// the wait the open would be served from userspace. Caller holds n.mu;
// it is released while waiting and held again on return.
func (n *fileNode) awaitBackingFreeLocked() {
	if n.ptOpen > 0 || n.usOpen > 0 {
		return
	}
	if c := n.fsys.holds.whenFree(n); c != nil {
		n.awaitReleaseLocked(c, releaseWait)
	}
}
