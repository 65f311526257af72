package fs

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

// Opening a file for writing and its write session: the staging file that
// holds what its writers write, started empty (a truncation) or with the
// file's current content, and installed on the node.

// openWrite opens the file for writing: every write lands in a staging
// file on the cache disk, uploaded whole when the file is closed.
func (n *fileNode) openWrite(ctx context.Context, trunc bool) (gofs.FileHandle, uint32, syscall.Errno) {
	f := n.fsys
	if f.wb == nil {
		return nil, 0, syscall.EROFS
	}
	w := n.ws()
	if trunc {
		if h := n.openRewrite(); h != nil {
			return h, 0, 0
		}
	}
	// The session starts at the first write or truncation, not here:
	// staging the current content would copy, or even download, a whole
	// checkpoint that the next request may truncate.
	h := &fileHandle{n: n, writable: true}
	var fh gofs.FileHandle = h
	var flags uint32
	n.mu.Lock()
	if !w.shadowed {
		n.waitReadersReleasedLocked()
	}
	w.writers++
	if n.ptOpen > 0 {
		// Readers hold the kernel's backing file: the writer names it
		// too, and its reads and writes come here (shadow.go).
		n.startShadowLocked()
		fh, flags = n.openShadowLocked(h), shadowOpenFlags
		if !n.watchesBackingLocked() {
			defer n.watchShadowBacking() // before the open returns: before any mapping
		}
	} else {
		n.usOpen++
		f.stats.UserspaceOpens.Add(1)
	}
	n.mu.Unlock()
	if trunc {
		if errno := n.truncateAtOpen(ctx, h); errno != 0 {
			return nil, 0, errno
		}
	}
	return fh, flags, 0
}

// truncateAtOpen truncates the file for an open(O_TRUNC) that got handle
// h, as the SETATTR the kernel sends without atomic O_TRUNC would: not new
// data of the opener (dd opens with O_TRUNC and closes that descriptor at
// once). If it fails the open fails, and h is released as the kernel
// releases a file whose open failed.
func (n *fileNode) truncateAtOpen(ctx context.Context, h *fileHandle) syscall.Errno {
	if err := n.truncate(ctx, 0, noOwner); err != nil {
		n.release(h)
		return toErrno(err)
	}
	return 0
}

// openRewrite opens for a truncating rewrite a file nobody has open, with
// a new, empty session written by passthrough as a created file is
// (ptwrite.go); nil when passthrough writes are off or the file is in use
// (the userspace path then truncates it).
func (n *fileNode) openRewrite() *liveHandle {
	w := n.ws()
	f := n.fsys
	idle := func() bool {
		return w.live == nil && w.sess == nil && w.writers == 0 && n.ptOpen == 0 && n.usOpen == 0 && n.backingFreeLocked()
	}
	n.mu.Lock()
	ok := idle()
	n.mu.Unlock()
	if !ok || !f.passthroughWrites() {
		return nil
	}
	key := n.key.get()
	st, err := f.wb.NewStaging(key)
	if err != nil {
		return nil // the userspace path reports it
	}
	file, err := f.dupStaging(n, st)
	if err != nil {
		st.Discard()
		return nil
	}
	pending := f.wb.Pending(key)
	w.sessMu.Lock()
	n.mu.Lock()
	if !idle() {
		n.mu.Unlock()
		w.sessMu.Unlock()
		file.Close()
		st.Discard()
		return nil
	}
	n.installSessionLocked(st, true, pending)
	h := f.goLive(n, file)
	w.writers = 1
	e := n.entry
	n.mu.Unlock()
	w.sessMu.Unlock()
	f.stats.PassthroughOpens.Add(1)
	f.trackLocal(n, key, e)
	return h
}

// startSession makes sure the node has a write session, truncated when
// trunc is set, else holding the file's current content. The content is
// staged with no lock held (it may be a copy of a large file or a bucket
// fetch); if another writer installed a session meanwhile, that one wins.
func (n *fileNode) startSession(ctx context.Context, trunc bool) error {
	w := n.ws()
	f := n.fsys
	n.mu.Lock()
	st := w.sess
	n.mu.Unlock()
	if st == nil {
		st, err := n.newSession(ctx, trunc)
		if err != nil {
			return err
		}
		key := n.key.get()
		pending := f.wb.Pending(key)
		w.sessMu.Lock()
		n.mu.Lock()
		installed := w.sess == nil
		if installed {
			n.installSessionLocked(st, trunc, pending)
		}
		e := n.entry
		n.mu.Unlock()
		w.sessMu.Unlock()
		if installed {
			f.trackLocal(n, key, e)
			return nil
		}
		st.Discard()
		if !trunc {
			return nil
		}
	} else if !trunc {
		return nil
	}
	// Truncate the session in place: under sessMu shared, as a write.
	w.sessMu.RLock()
	defer w.sessMu.RUnlock()
	n.mu.Lock()
	st = w.sess
	n.mu.Unlock()
	if st == nil { // committed meanwhile: the next write starts afresh
		return n.startSessionAgain(ctx)
	}
	if err := st.Truncate(0); err != nil {
		return err
	}
	n.mu.Lock()
	n.unfollowLocked()
	n.entry.Size, n.entry.MTime = 0, time.Now().UnixNano()
	n.mu.Unlock()
	return nil
}

// installSessionLocked makes st the node's session: empty (trunc) or
// holding the file's content; pending says an upload of the key is still
// in the writeback manager. Caller holds sessMu and mu, and w.sess is nil.
func (n *fileNode) installSessionLocked(st *writeback.Staging, trunc, pending bool) {
	w := n.ws()
	if n.ptOpen > 0 {
		n.startShadowLocked() // the readers' backing file no longer holds the content
	}
	w.sess = st
	st.StartFrom(n.entry)
	if n.unlinked {
		st.Orphan() // written after its name went: for its descriptors only
	}
	if trunc {
		n.unfollowLocked()
		n.entry.Size, n.entry.MTime = 0, time.Now().UnixNano()
		st.MarkDirty()
	} else {
		n.entry.Size = st.Size()
	}
	if pending {
		n.base = "" // our own upload comes first: follow it unconditionally
	}
	n.entry.Local = true
}

// startSessionAgain is startSession(trunc) after a commit raced it.
func (n *fileNode) startSessionAgain(ctx context.Context) error {
	w := n.ws()
	w.sessMu.RUnlock()
	defer w.sessMu.RLock()
	return n.startSession(ctx, true)
}

// newSession stages the file's current content (or nothing, if trunc) in
// a new staging file: the writeback manager's pending content of the key
// if it has some, else the bucket version.
func (n *fileNode) newSession(ctx context.Context, trunc bool) (*writeback.Staging, error) {
	f := n.fsys
	key := n.key.get()
	n.mu.Lock()
	e := n.entry
	n.mu.Unlock()
	if trunc {
		return f.wb.NewStaging(key)
	}
	if c, ok := n.content(); ok {
		defer c.Release()
		return f.wb.NewStagingCopy(key, c.File(), c.Size())
	}
	if e.Local { // uploaded meanwhile: stage the bucket's version
		var err error
		if e, err = n.refresh(ctx); err != nil {
			return nil, err
		}
	}
	if e.Size == 0 {
		return f.wb.NewStaging(key)
	}
	return n.stageFromBucket(ctx, e)
}

// refresh takes the bucket's entry of a node whose local content is
// gone (its upload is complete: the namespace shows the new version
// before the manager lets go of the content). It returns the node's entry
// as it stands.
//
// A node whose name is gone (a rename over it, an unlink) takes the
// version its own upload created: its name is another file's by now, and
// a process that looked it up before opens it after (on local disk, it
// reads this file's bytes, not the new one's). Without an upload of its
// own it has no bytes left anywhere: ESTALE, never the entry of whatever
// took the name. A node whose name stands takes the name's entry, which
// may be newer than its own upload (a rewrite through another inode of
// the name: on local disk, one file).
func (n *fileNode) refresh(ctx context.Context) (meta.Entry, error) {
	w := n.peekWS() // a read path: no write state made for it
	n.mu.Lock()
	if v, ok := w.ownJob().Landed(); ok && n.unlinked && w.session() == nil && n.entry.Local {
		n.entry.Local, n.entry.Version, n.base = false, v, v
	}
	e, gone := n.entry, n.unlinked
	n.mu.Unlock()
	switch {
	case !e.Local:
		return e, nil
	case gone:
		return e, fmt.Errorf("fs: %s: the file was replaced or deleted before its upload was known: %w", n.key.get(), backend.ErrVersionChanged)
	}
	key := n.key.get()
	dir, name := meta.Parent(key)
	e, err := n.fsys.meta.Lookup(uninterrupted(ctx), dir, name)
	if err != nil {
		return meta.Entry{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.peekWS().session() == nil && n.entry.Local && !n.unlinked && !e.Local && !e.Dir && n.key.get() == key {
		if v, landed := n.peekWS().ownJob().Landed(); n.ptOpen > 0 && (!landed || v != e.Version) {
			// Not the version its own upload made of the committed file
			// the kernel reads (a discarded upload: the bucket's older
			// one): a file of its own, which no open may pass through
			// while the kernel keeps that one.
			n.startShadowLocked()
		}
		n.entry, n.base = e, e.Version
	}
	return n.entry, nil
}

// stageFromBucket copies a bucket version into a new staging file: from
// the cache when it holds it all, else through the fetcher.
func (n *fileNode) stageFromBucket(ctx context.Context, e meta.Entry) (*writeback.Staging, error) {
	f := n.fsys
	obj, err := f.store.Acquire(cache.ObjectKey{Source: f.source, Key: n.key.get(), Version: e.Version, Size: e.Size, MTime: e.MTime})
	if err != nil {
		return nil, err
	}
	defer obj.Release()
	if _, err := obj.Verify(); err == nil && obj.Complete() && obj.Verified() {
		if fd, err := obj.Fd(); err == nil {
			if dup, err := unix.Dup(fd); err == nil {
				src := os.NewFile(uintptr(dup), n.key.get())
				defer src.Close()
				return f.wb.NewStagingCopy(n.key.get(), src, e.Size)
			}
		}
	}
	st, err := f.wb.NewStaging(n.key.get())
	if err != nil {
		return nil, err
	}
	r := f.fetch.NewReader(obj)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < e.Size; {
		k, err := r.ReadAt(ctx, buf, off)
		if err == nil && k == 0 {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			_, err = st.WriteAt(buf[:k], off)
		}
		if err != nil {
			st.Discard()
			return nil, err
		}
		off += int64(k)
	}
	return st, nil
}
