package fs

import (
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
)

// Opens served from userspace while the kernel holds a backing file for
// the inode.
//
// Once an inode has a backing file (a passthrough handle is open), the
// kernel accepts only opens that name that same backing file: a plain
// userspace open fails. A writer that opens a file another process reads
// through passthrough (torch.save over the checkpoint an evaluator holds
// open, an append to a log `tail -f` follows) cannot have a backing file
// of its own either. Such an open gets a shadowHandle: passthrough for the
// kernel, with the inode's backing file, and FOPEN_DIRECT_IO, with which
// the kernel sends its reads and writes to the daemon instead (only a
// memory mapping goes to the backing file). The writer's bytes go to its
// write session as on any userspace handle.
//
// From the moment a writer opens so (or a truncation by path starts a
// write session, or a discarded upload takes the file back to the
// bucket's version), the backing file no longer holds the file's
// content, so every later open is a shadowHandle too
// (writeState.shadowed), until the last handle naming the backing file
// is released and the kernel lets it go; then opens are passthrough
// again, on the new content. The readers open before the writer read
// their cache file, the version they opened, plus what is appended to it
// (follow.go).

// shadowHandle is a userspace handle on an inode whose backing file the
// kernel holds. go-fuse adds FOPEN_PASSTHROUGH and the inode's backing id
// to its open; PassthroughFd is asked only when the inode has none any
// more (its last passthrough handle went meanwhile), and then the handle
// is a plain FOPEN_DIRECT_IO one, which the kernel takes beside any other.
type shadowHandle struct{ *fileHandle }

func (h *shadowHandle) PassthroughFd() (int, bool) { return -1, false }

// shadowOpenFlags are a shadowHandle's open flags: the kernel sends every
// read and write to the daemon, and keeps no page cache of the inode's.
const shadowOpenFlags = fuse.FOPEN_DIRECT_IO

// openShadowLocked counts a shadowHandle for h, a handle the caller made
// on n, among those naming the kernel's backing file (ptOpen: the kernel
// keeps it until they are all released). Caller holds n.mu.
func (n *fileNode) openShadowLocked(h *fileHandle) *shadowHandle {
	h.pt = true
	n.ptOpen++
	n.fsys.stats.UserspaceOpens.Add(1)
	return &shadowHandle{h}
}

// startShadowLocked makes the backing file stale for n, if it is not
// already: its content changes (a writer opens, a truncation starts a
// write session) while passthrough handles are open (ptOpen > 0).
// Caller holds n.mu.
func (n *fileNode) startShadowLocked() {
	w := n.ws()
	if w.shadowed {
		return
	}
	w.shadowed, w.shadowOf = true, n.entry
	n.fsys.log.Info("fs: changed while open for reading through passthrough: until those readers close, this file is read and written through strata; they see what is appended, not what is rewritten", "key", n.key.get())
}

// watchesBackingLocked reports whether the shadow already records what
// the readers' backing file is, or needs not (it is committed content).
// Caller holds n.mu.
func (n *fileNode) watchesBackingLocked() bool {
	w := n.ws()
	return w.shadowObj != nil || w.shadowOf.Local
}

// watchShadowBacking records what the readers' backing file is, the
// cached copy of the bucket version the node stood for when the shadow
// started, so that the end of the shadow (endShadow) can tell whether a
// writer's memory mapping wrote it meanwhile. Called with no lock held,
// before the writer's open returns.
func (n *fileNode) watchShadowBacking() {
	w := n.ws()
	n.mu.Lock()
	e := w.shadowOf
	n.mu.Unlock()
	f := n.fsys
	obj, err := f.store.Acquire(cache.ObjectKey{Source: f.source, Key: n.key.get(), Version: e.Version, Size: e.Size, MTime: e.MTime})
	if err != nil {
		return
	}
	st, err := stampOfObject(obj)
	n.mu.Lock()
	keep := err == nil && w.shadowed && w.shadowObj == nil && w.shadowOf == e
	if keep {
		w.shadowObj, w.shadowStamp = obj, st
	}
	n.mu.Unlock()
	if !keep {
		obj.Release()
	}
}

// endShadowLocked ends n's shadow once the kernel let go of the backing
// file (ptOpen dropped to 0), and returns what endShadow must check.
// Caller holds n.mu.
func (n *fileNode) endShadowLocked() shadowEnd {
	w := n.ws()
	end := shadowEnd{obj: w.shadowObj, stamp: w.shadowStamp, followed: w.followed, size: w.shadowOf.Size}
	w.shadowed, w.shadowOf, w.shadowObj, w.shadowStamp = false, meta.Entry{}, nil, fileStamp{}
	w.unfollowed, w.followed, w.followBytes = false, false, 0
	return end
}

// shadowEnd is what endShadow checks: the readers' cache file, its stamp
// when the writer opened, whether appends were written to it, and the
// size of the version it holds.
type shadowEnd struct {
	obj      *cache.Object
	stamp    fileStamp
	followed bool
	size     int64
}

// endShadow checks the cache file the readers held while a writer was
// open. A writable shared mapping made by that writer maps it (the kernel
// maps a DIRECT_IO passthrough file's backing file), and its stores change
// the cached copy of a bucket version; the appends followed into it
// (follow.go) lengthened it. A changed file is distrusted at once (no open
// passes it through unverified), cut back to the version's size, and
// verified in the background, so that the blocks that differ from the
// bucket's are dropped and fetched again rather than served as that
// version. Called with no lock held.
func (n *fileNode) endShadow(end shadowEnd) {
	obj := end.obj
	if obj == nil {
		return
	}
	now, err := stampOfObject(obj)
	if !end.followed && (err != nil || now == end.stamp) {
		obj.Release()
		return
	}
	obj.Distrust() // before the next open can pass it through
	w := n.peekWS()
	go func() { // reads the whole file: not in the RELEASE that got here
		defer obj.Release()
		if end.followed {
			// The writes that decided to follow before the shadow
			// ended hold sessMu shared until they have.
			w.sessMu.Lock()
			w.sessMu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
			if err := truncateObjectFile(obj, end.size); err != nil {
				n.fsys.log.Warn("fs: could not cut the cached copy back after following appends; it is verified", "key", n.key.get(), "err", err)
			}
		}
		bad, err := obj.Verify()
		if bad > 0 || err != nil {
			n.fsys.log.Warn("fs: the cached copy of this file was written through a memory mapping while a writer shared it with passthrough readers: those stores are not uploaded; the cached copy was verified again", "key", n.key.get(), "blocks_dropped", bad, "err", err)
		}
	}()
}

// stampOfObject is the stamp of obj's cache file.
func stampOfObject(obj *cache.Object) (fileStamp, error) {
	fd, err := obj.Fd()
	if err != nil {
		return fileStamp{}, err
	}
	return stampOfFd(fd)
}
