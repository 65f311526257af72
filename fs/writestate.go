package fs

import (
	"sync"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

// writeState is what a file node has only once it is written here: opened
// for writing, created, renamed, or left holding committed content when
// its name went. Most nodes of a mount are files only ever read (a
// dataset's), and the kernel may know millions of them, so these fields
// are not in every node: a node gets its writeState at its first write
// open (fileNode.ws) and keeps it for its life. Read paths look at it
// without making one (fileNode.peekWS): a node without one has no session,
// no writer and no upload of its own.
type writeState struct {
	// sessMu orders writes against the commit of their session: writes
	// and reads of sess hold it shared, a commit holds it exclusively.
	sessMu sync.RWMutex

	// The fields below are guarded by fileNode.mu.

	// last is the upload of the latest commit. A commit with no base (a
	// rewrite) is conditional on the version last created, or, while it
	// is pending, on what last started from (writeback follows it), so
	// that a rewrite never replaces what another node put in between.
	last *writeback.Job
	// own is the upload of the latest commit, whatever it follows (a
	// rename clears last, not own): once it has landed, its version is
	// what the node reads after its name is gone (refresh), and a lookup
	// of its key that finds that version finds this node (fileIno).
	// Cleared when the node's key changes without its upload moving along.
	own *writeback.Job
	// sess is the open write session, if any. What it holds is the
	// session's to say (writeback.Staging: Dirty, new data not yet
	// committed; Failed, a write that failed, never uploaded).
	sess    *writeback.Staging
	writers int           // open handles with write access
	usGone  chan struct{} // closed when usOpen drops to 0 (made by an open that waits for it)
	ptGone  chan struct{} // closed when ptOpen drops to 0 (made by a writer's open that waits for it)
	// tids caches which process each writing thread belongs to, until
	// the session's commit (who wrote to it is the session's record:
	// writeback.Staging.WrittenBy, owner.go).
	tids ownerCache
	// live is the session's passthrough state while the kernel writes
	// its staging file itself (ptwrite.go); nil otherwise. Set at
	// create, taken off at the release of the last writer.
	live *liveWrite
	// shadowed: the kernel's backing file no longer holds the node's
	// content (it changed while passthrough handles were open): every
	// open is a shadowHandle until ptOpen drops to 0 (shadow.go). Only
	// a change starts one, so only a written node has the fields.
	// shadowOf is the entry the node stood for then; shadowObj and
	// shadowStamp the backing file's cache object and stamp, when it is
	// a bucket version's and a writer opened (endShadow checks them).
	shadowed    bool
	shadowOf    meta.Entry
	shadowObj   *cache.Object
	shadowStamp fileStamp
	// While the writes of the shadow only add bytes past the end of
	// shadowOf, each is also written to shadowObj's file, so that the
	// readers opened before see what is appended (follow.go). unfollowed:
	// a truncation or a write within shadowOf's bytes ended that for the
	// rest of the shadow; followed: some bytes were written there;
	// followBytes: how many (maxFollow bounds them).
	unfollowed, followed bool
	followBytes          int64
	// orphan is the committed content the node had when its name went
	// (markUnlinked), held for orphanGrace, or until the last of the
	// descriptors open then is released (orphanHeld): its key may name
	// another file by now.
	orphan     *writeback.Content
	orphanHeld bool
	// gonePin holds the cached copy of the bucket version a node stood
	// for when its name went with descriptors open (markUnlinked): their
	// reads and their first write stage it, and the bucket no longer has
	// it. Released at the last release (discardIfGone).
	gonePin *cache.Object
}

// ws returns the node's write state, making it on first use.
func (n *fileNode) ws() *writeState {
	if w := n.w.Load(); w != nil {
		return w
	}
	n.w.CompareAndSwap(nil, new(writeState))
	return n.w.Load()
}

// peekWS returns the node's write state, nil if it was never written.
func (n *fileNode) peekWS() *writeState { return n.w.Load() }

// The accessors below read a write state that may be nil (peekWS) as one
// with every field zero. Caller holds fileNode.mu.

func (w *writeState) session() *writeback.Staging {
	if w == nil {
		return nil
	}
	return w.sess
}

func (w *writeState) liveSession() *liveWrite {
	if w == nil {
		return nil
	}
	return w.live
}

func (w *writeState) ownJob() *writeback.Job {
	if w == nil {
		return nil
	}
	return w.own
}

func (w *writeState) isShadowed() bool { return w != nil && w.shadowed }

func (w *writeState) writerCount() int {
	if w == nil {
		return 0
	}
	return w.writers
}
