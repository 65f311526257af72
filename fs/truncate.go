package fs

import (
	"context"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func (n *fileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	f := n.fsys
	defer func(start time.Time) { f.observe("setattr", start, errno) }(time.Now())
	if size, ok := in.GetSize(); ok {
		if f.wb == nil {
			return syscall.EROFS
		}
		// ftruncate(fd) is new data of the caller; truncate(path) is
		// not (open(O_TRUNC) is not either: truncateAtOpen).
		o := noOwner
		if fh != nil {
			o = n.ownerOf(callerPid(ctx))
		}
		if err := n.truncate(ctx, int64(size), o); err != nil {
			return toErrno(err)
		}
	}
	if mt, ok := in.GetMTime(); ok {
		n.mu.Lock()
		if n.peekWS().session() != nil || n.entry.Local {
			n.entry.MTime = mt.UnixNano() // honoured until the bucket assigns its own
		}
		n.mu.Unlock()
	}
	// Modes and owners are the mount's (--file-mode, --uid, --gid):
	// accepted, not stored, since objects have no POSIX attributes.
	n.attr(&out.Attr)
	// go-fuse fills the inode number in a GETATTR reply, not in this one,
	// and the kernel takes it from every reply with attributes: without
	// it stat(2) shows inode 0 until the next GETATTR (SQLite then takes
	// its database for moved).
	out.Ino = n.StableAttr().Ino
	out.SetTimeout(f.timeout())
	return 0
}

// truncate sets the size; a path truncate (no writer open) commits at once.
// An explicit truncation is new data of the process o that asked for it.
func (n *fileNode) truncate(ctx context.Context, size int64, o owner) error {
	w := n.ws()
	// Not cancelled by the kernel's INTERRUPT, as a close is not (Flush):
	// any signal to the caller would fail truncate(2) with EINTR midway
	// through staging or uploading.
	ctx = uninterrupted(ctx)
	n.mu.Lock()
	lw := w.live
	n.mu.Unlock()
	if lw != nil {
		return n.truncateLive(lw, size)
	}
	if err := n.startSession(ctx, size == 0); err != nil {
		return err
	}
	w.sessMu.RLock()
	n.mu.Lock()
	st := w.sess
	n.mu.Unlock()
	var terr error
	if st != nil {
		terr = st.Truncate(size)
	}
	n.mu.Lock()
	n.unfollowLocked()
	if o != noOwner && st != nil {
		markWrote(st, o)
	}
	if terr == nil { // a failure is the session's (st.Failed): never uploaded
		n.entry.Size, n.entry.MTime = size, time.Now().UnixNano()
	}
	writers := w.writers
	n.mu.Unlock()
	w.sessMu.RUnlock()
	if terr != nil {
		return terr
	}
	if writers == 0 { // a path truncate: nobody else will close the file
		err := n.commit(ctx)
		n.unholdName()
		return err
	}
	return nil
}
