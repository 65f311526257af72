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
	asked *fileNode                        // whose descriptor go-fuse asked for last
	byID  map[int32]map[*fileNode]struct{} // a registration reused for the same file is shared
	held  map[*fileNode]int32
}

func newBackingHolds() *backingHolds {
	return &backingHolds{byID: map[int32]map[*fileNode]struct{}{}, held: map[*fileNode]int32{}}
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
	if b.byID[id] == nil {
		b.byID[id] = map[*fileNode]struct{}{}
	}
	b.byID[id][n] = struct{}{}
	b.held[n] = id
}

// unregistered: go-fuse let id go. A registration two nodes share (the
// same cache file, open under both) lets both go: the other's own release
// is then not waited for, which matters only if it changes content
// meanwhile.
func (b *backingHolds) unregistered(id int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n := range b.byID[id] {
		if b.held[n] == id {
			delete(b.held, n)
		}
	}
	delete(b.byID, id)
}

// holds reports whether go-fuse still holds a registration for n.
func (b *backingHolds) holds(n *fileNode) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.held[n]
	return ok
}

// backingFreeLocked reports, for an open that would hand the kernel a
// backing file of its own (no passthrough handle of n is open), whether
// go-fuse has let go of the node's previous registration; if not, the
// open must not be passthrough (go-fuse would give it that one). Caller
// holds n.mu, so that no passthrough open of n starts meanwhile.
func (n *fileNode) backingFreeLocked() bool {
	return !n.fsys.holds.holds(n)
}
