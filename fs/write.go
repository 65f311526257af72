package fs

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

var (
	_ gofs.NodeSetattrer = (*fileNode)(nil)
	_ gofs.FileWriter    = (*fileHandle)(nil)
	_ gofs.FileFlusher   = (*fileHandle)(nil)
	_ gofs.FileFsyncer   = (*fileHandle)(nil)
)

func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (_ uint32, errno syscall.Errno) {
	n, f := h.n, h.n.fsys
	w := n.ws()
	defer func(start time.Time) { f.observe("write", start, errno) }(time.Now())
	f.stats.Writes.Add(1)
	f.stats.WriteBytes.Add(int64(len(data)))
	o := n.ownerOf(callerPid(ctx))
	n.mu.Lock()
	lw := w.live
	n.mu.Unlock()
	if lw != nil {
		// The kernel did not pass this write through (it refused the
		// backing file): write where it would have.
		k, err := lw.file.WriteAt(data, off)
		if err != nil {
			lw.fail(fmt.Errorf("fs: %s: write: %w", n.key.get(), err))
			return 0, toErrno(err)
		}
		return uint32(k), 0
	}
	for range 2 {
		w.sessMu.RLock()
		n.mu.Lock()
		st := w.sess
		n.mu.Unlock()
		if st == nil { // another descriptor committed the session: open a new one
			w.sessMu.RUnlock()
			if err := n.startSession(ctx, false); err != nil {
				return 0, toErrno(err)
			}
			continue
		}
		k, err := st.WriteAt(data, off) // a failure is the session's (st.Failed): never uploaded
		n.mu.Lock()
		markWrote(st, o) // a failed write counts: its close reports the error
		var follow *cache.Object
		if err == nil {
			n.entry.Size = max(n.entry.Size, off+int64(k))
			n.entry.MTime = time.Now().UnixNano()
			follow = n.followLocked(off, int64(k))
		}
		n.mu.Unlock()
		if follow != nil {
			n.follow(follow, data[:k], off)
		}
		w.sessMu.RUnlock()
		if err != nil {
			f.log.Warn("fs: write failed; the file will not be uploaded", "key", n.key.get(), "off", off, "err", err)
			return 0, toErrno(err)
		}
		return uint32(k), 0
	}
	return 0, syscall.EIO
}

// readLocal reads the node's local content, if it has any: its write
// session, or the content the writeback manager holds for the key until
// its upload is complete. Not handled (false): the node reads as the
// bucket's version.
func (n *fileNode) readLocal(dest []byte, off int64) (int, error, bool) {
	// Every userspace read asks: a node never written has no write state
	// and none is made for it. One made after the look (a writer's open
	// racing this read) is looked at again under its lock.
	w := n.peekWS()
	for {
		if w != nil {
			w.sessMu.RLock()
			defer w.sessMu.RUnlock()
		}
		if now := n.peekWS(); now != w {
			w = now
			continue
		}
		break
	}
	n.mu.Lock()
	st, isLocal, size, lw := w.session(), n.entry.Local, n.entry.Size, w.liveSession()
	n.mu.Unlock()
	var src io.ReaderAt
	switch {
	case lw != nil: // the kernel did not pass this read through
		s, _, err := lw.state()
		if err != nil {
			return 0, err, true
		}
		src, size = lw.file, s
	case st != nil:
		src = st
	case isLocal:
		c, ok := n.content()
		if !ok {
			return 0, nil, false // uploaded: the caller refreshes the entry
		}
		defer c.Release()
		src, size = c, c.Size()
	default:
		return 0, nil, false
	}
	if off >= size {
		return 0, nil, true
	}
	k, err := src.ReadAt(dest[:min(int64(len(dest)), size-off)], off)
	if err == io.EOF {
		err = nil
	}
	return k, err, true
}

// commit hands the node's write session to the uploader.
func (n *fileNode) commit(ctx context.Context) error {
	_, err := n.commitSession(ctx, nil)
	return err
}

// commitSession is commit; lw is the node's passthrough write session,
// if the session is one (the kernel keeps writing the staging file: see
// ptwrite.go). It returns the job made, if any.
func (n *fileNode) commitSession(ctx context.Context, lw *liveWrite) (*writeback.Job, error) {
	w := n.peekWS() // an fsync of a file only read asks too
	if w == nil {
		return nil, nil
	}
	f := n.fsys
	if lw != nil {
		n.reserveLive() // before the locks: it may evict
	}
	w.sessMu.Lock()
	n.mu.Lock()
	st, unlinked := w.sess, n.unlinked
	var werr error
	if st != nil {
		werr = st.Failed()
	}
	if lw != nil && werr == nil {
		werr = lw.failure()
	}
	if st == nil || (!st.Dirty() && !unlinked && werr == nil) {
		n.mu.Unlock()
		w.sessMu.Unlock()
		return nil, nil
	}
	if unlinked {
		// Nothing goes up under a name that is gone, but the file lives
		// on for its other descriptors, as on local disk: its bytes go
		// with the last of them (discardIfGone).
		n.mu.Unlock()
		w.sessMu.Unlock()
		return nil, nil
	}
	w.sess = nil
	w.tids = nil // the next session's threads are asked again
	if werr != nil {
		key := n.key.get()
		n.abandonLocked(werr, st.Previous())
		n.mu.Unlock()
		w.sessMu.Unlock()
		// Never uploaded, never thrown away: the staged bytes are the
		// only copy of what the writer managed to write.
		f.wb.Keep(key, st, werr)
		n.forgetIfNew()
		return nil, werr
	}
	// From Register on the manager holds the committed bytes: reads of
	// the key find them there, with no window in which the file has
	// neither a session nor pending content. Register does no I/O.
	base, mtime, key := n.base, n.entry.MTime, n.key.get()
	if v, ok := w.last.Landed(); base == "" && ok {
		base = v
	}
	// Held (async mode) until the file's last close or an fsync: see
	// release and sync.
	var j *writeback.Job
	var err error
	if lw != nil {
		var size int64
		if j, size, mtime, err = f.wb.RegisterLive(key, st, base); err == nil {
			n.entry.Size, n.entry.MTime = size, mtime
		}
	} else {
		j, err = f.wb.Register(key, st, base, mtime, true)
	}
	if err != nil {
		w.sess = st // still a session (dirty): a later close tries again
		n.mu.Unlock()
		w.sessMu.Unlock()
		return nil, err
	}
	n.base, w.last = "", j // later commits follow this one
	w.own = j
	e := n.entry
	n.mu.Unlock()
	w.sessMu.Unlock()
	f.trackLocal(n, key, e) // listings and new lookups show the committed size
	if err = f.wb.Journal(ctx, j); err != nil {
		f.log.Warn("fs: upload failed; the data is kept (`strata uploads` says whether it is retried)", "key", key, "err", err)
	}
	return j, err
}

// Flush is a close() of one descriptor of the handle: the writer's last
// one, a dup of it, or the copy a forked child inherited. Only a close by
// a process that wrote since the last upload publishes the file (see
// owner.go); one dying of a signal publishes nothing and its bytes are
// kept aside.
func (h *fileHandle) Flush(ctx context.Context) (errno syscall.Errno) {
	if !h.writable {
		return 0
	}
	n := h.n
	w := n.ws() // a writer's handle: it has one
	defer func(start time.Time) { n.fsys.observe("flush", start, errno) }(time.Now())
	tid := callerPid(ctx)
	n.mu.Lock()
	lw := w.live
	n.mu.Unlock()
	if lw != nil {
		return toErrno(n.flushLive(context.WithoutCancel(ctx), lw, tid))
	}
	o := tgidOf(tid) // fresh, not cached: a thread id can be reused
	n.mu.Lock()
	st := w.sess
	n.mu.Unlock()
	wrote := st != nil && wroteTo(st, o)
	if !wrote {
		if st != nil && st.Dirty() {
			st.PublishAtRelease() // its last release does: strata sync waits for it
		}
		return 0 // carries no new data: nothing to publish
	}
	// Not cancelled by the kernel's INTERRUPT: any signal to the writer
	// (the Go runtime's own SIGURG preemption included) would make close()
	// fail with EINTR mid-upload. A killed writer does not wait anyway.
	ctx = context.WithoutCancel(ctx)
	if sig := killedBy(tid); sig != 0 {
		n.mu.Lock()
		if st := w.sess; st != nil { // the commit keeps it aside
			st.Fail(fmt.Errorf("fs: %s: the writer was killed by signal %d before closing the file: %w", n.key.get(), sig, syscall.EIO))
		}
		n.mu.Unlock()
	}
	return toErrno(n.commit(ctx))
}

func (h *fileHandle) Fsync(ctx context.Context, flags uint32) (errno syscall.Errno) {
	defer func(start time.Time) { h.n.fsys.observe("fsync", start, errno) }(time.Now())
	return toErrno(h.n.sync(context.WithoutCancel(ctx))) // as Flush
}

// sync commits what is written and waits until the file is in the bucket
// (a file the kernel writes by passthrough: syncLive).
func (n *fileNode) sync(ctx context.Context) error {
	if n.fsys.wb == nil {
		return nil
	}
	n.mu.Lock()
	lw := n.peekWS().liveSession()
	n.mu.Unlock()
	if lw != nil {
		return n.syncLive(ctx, lw)
	}
	if err := n.commit(ctx); err != nil {
		return err
	}
	key, ok := n.unholdName()
	if !ok {
		return nil // nothing goes up: the key's uploads are another file's
	}
	return n.fsys.wb.WaitKey(ctx, key)
}

// unholdName lets the held uploads of the node's name start (its last
// close, an fsync), and reports the name, unless the name is no longer
// the node's: after an unlink, or a rename over it, what is held under it
// is another file's, open elsewhere and let go at that file's own last
// close. n.mu is held across Unhold, which does no I/O, so that the name
// cannot go in between.
func (n *fileNode) unholdName() (key string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unlinked {
		return "", false
	}
	key = n.key.get()
	n.fsys.wb.Unhold(key)
	return key, true
}

// release drops a handle's share of the node.
func (n *fileNode) release(h *fileHandle) {
	w := n.peekWS() // not nil for a writer's handle, or one a writer waits on
	n.mu.Lock()
	switch {
	case h.pt:
		n.ptOpen--
		if n.ptOpen == 0 && w != nil && w.ptGone != nil {
			close(w.ptGone)
			w.ptGone = nil
		}
		if n.ptOpen == 0 && w.isShadowed() {
			defer n.endShadow(n.endShadowLocked()) // after n.mu is released below
		}
	default:
		n.usOpen--
		if n.usOpen == 0 && w != nil && w.usGone != nil {
			close(w.usGone)
			w.usGone = nil
		}
	}
	if !h.writable {
		gone := n.unlinked && w != nil
		n.mu.Unlock()
		if gone {
			n.discardIfGone()
		}
		return
	}
	w.writers--
	// The last writer of a passthrough session: from here on the file
	// reads as committed, and a new writer starts a session of its own.
	var lw *liveWrite
	if w.writers == 0 && w.live != nil {
		lw, w.live = w.live, nil
	}
	// Dirty at the last release: written through a shared mapping after
	// close, truncated by open(O_TRUNC) and closed without a write, or
	// written by a process other than the ones that closed it. The file
	// as it stands is what its writers left: publish it now.
	last := w.writers == 0
	late := last && w.sess != nil && w.sess.Dirty()
	n.mu.Unlock()
	if lw != nil {
		n.finishLive(lw)
		n.discardIfGone()
		return
	}
	// The last close of a written file: its held upload may start.
	switch {
	case late:
		go func() {
			_ = n.commit(context.Background()) // commit logs a failure; the data is kept
			n.unholdName()
		}()
	case last:
		n.unholdName()
	}
	n.discardIfGone()
}

// discardIfGone throws away the write session of a file whose name is
// gone once no descriptor holds the file any more, and the committed
// bytes it kept past orphanGrace for them (dropOrphan): what it held was
// never going to be uploaded, and nobody can read it again.
func (n *fileNode) discardIfGone() {
	w := n.peekWS()
	if w == nil {
		return
	}
	w.sessMu.Lock()
	n.mu.Lock()
	if !n.unlinked || n.usOpen > 0 || n.ptOpen > 0 {
		n.mu.Unlock()
		w.sessMu.Unlock()
		return
	}
	st := w.sess
	if st != nil {
		w.sess, w.tids = nil, nil
	}
	var orphan *writeback.Content
	if w.orphanHeld {
		orphan, w.orphan, w.orphanHeld = w.orphan, nil, false
	}
	pin := w.gonePin
	w.gonePin = nil
	n.mu.Unlock()
	w.sessMu.Unlock()
	orphan.Release()
	if pin != nil {
		pin.Release()
	}
	if st != nil {
		st.Discard()
	}
}

// abandonLocked drops a session in which a write failed: an object store
// file is whole or not at all, so what was staged is not uploaded and the
// file goes back to previous, what it was before the session (the
// session's record: Staging.Previous; zero, a file it created, which goes
// away). The application saw the failed write; close returns the error
// again. Caller holds n.mu (and sessMu).
func (n *fileNode) abandonLocked(werr error, previous meta.Entry) {
	n.fsys.log.Error("fs: a write to this file failed; it is not uploaded and keeps its previous content", "key", n.key.get(), "err", werr)
	if previous == (meta.Entry{}) {
		n.entry.Local, n.entry.Size = false, 0
		n.unlinked = true
		return
	}
	n.entry = previous
}

// forgetIfNew removes a new file abandoned by abandonLocked from the tree.
func (n *fileNode) forgetIfNew() {
	n.mu.Lock()
	gone := n.unlinked
	n.mu.Unlock()
	f := n.fsys
	key := n.key.get()
	dir, name := meta.Parent(key)
	// The kernel still caches the abandoned bytes (and, for a new file,
	// its name): tell it, off the request path (a notification must not
	// wait on a lock the triggering request holds).
	parent := n.parentDir()
	go func() {
		// Best effort: ENOENT says the kernel had nothing cached.
		_ = n.NotifyContent(0, 0)
		if gone && parent != nil {
			_ = parent.NotifyEntry(name)
		}
	}()
	if gone {
		f.untrack(key, n)
		f.meta.ClearLocal(dir, name)
		return
	}
	n.mu.Lock()
	e := n.entry
	n.mu.Unlock()
	if f.wb.Pending(key) {
		// The previous commit's content is still the manager's: the
		// tree shows it again (the abandoned session showed its own).
		f.trackLocal(n, key, e)
		return
	}
	// The previous content is the bucket's, even for a file written here
	// before (its upload landed): the tree shows the bucket's entry, and
	// the node takes it at its next open (settleIfUploaded).
	f.untrack(key, n)
	f.meta.ClearLocal(dir, name)
}

// parentDir returns the inode of the node's directory, if it is known.
func (n *fileNode) parentDir() *gofs.Inode {
	_, p := n.Parent()
	return p
}
