package fs

import "time"

// releaseWait bounds how long a read-only open waits for the RELEASE of
// writer handles whose content is committed. close() returns before the
// daemon sees the RELEASE (the kernel sends it in the background), so
// the open that follows a writer's close (torch.load after torch.save)
// usually arrives first; the kernel itself already let go of the
// writer's file, and the open can be passthrough once the daemon has
// too. A writer that really stays open (another process holds the
// descriptor) costs a reader this much, once per open, and the reader
// is served from userspace.
const releaseWait = 100 * time.Millisecond

// readerReleaseWait bounds how long an open for writing waits for the
// RELEASE of passthrough readers (`cat f; echo x >> f`), which can come
// hundreds of milliseconds after the close on a loaded machine. What it
// spares is a shadow (shadow.go): the writer, and every open until those
// readers' RELEASE, served through the daemon without the page cache. A
// reader that really stays open costs the first writer this much; the
// opens after it, shadowed already, do not wait.
const readerReleaseWait = time.Second

// waitWritersReleasedLocked waits, up to releaseWait, until the node has
// no userspace handle open, if the only ones open are writers whose
// content is committed (a RELEASE may be on its way). Caller holds n.mu;
// it is released while waiting and held again on return.
func (n *fileNode) waitWritersReleasedLocked() {
	w := n.peekWS()
	if n.ptOpen > 0 || n.usOpen == 0 || n.usOpen != w.writerCount() || w.session() != nil {
		return
	}
	if w.usGone == nil { // w is not nil: it has writers
		w.usGone = make(chan struct{})
	}
	n.awaitReleaseLocked(w.usGone, releaseWait)
}

// waitReadersReleasedLocked waits, up to readerReleaseWait, until the node has
// no passthrough handle open: a writer's open beside them is a shadow,
// and the reader that just closed it (`cat f; echo x >> f`) has usually
// not had its RELEASE answered yet. Caller holds n.mu; it is released
// while waiting and held again on return.
func (n *fileNode) waitReadersReleasedLocked() {
	if n.ptOpen == 0 {
		return
	}
	w := n.ws() // a writer's open
	if w.ptGone == nil {
		w.ptGone = make(chan struct{})
	}
	n.awaitReleaseLocked(w.ptGone, readerReleaseWait)
}

// awaitReleaseLocked waits, up to bound, for gone to be closed. Caller
// holds n.mu; it is released while waiting and held again on return.
func (n *fileNode) awaitReleaseLocked(gone <-chan struct{}, bound time.Duration) {
	n.mu.Unlock()
	t := time.NewTimer(bound)
	select { // not cut short by the caller's signals: bounded instead
	case <-gone:
	case <-t.C:
	}
	t.Stop()
	n.mu.Lock()
}
