package fs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/prefetch"
)

// fileNode is one file. Its inode number comes from the key and the
// version it was found with (ident), which never changes for the node's
// life; its content is either a bucket version (entry.Version) or local
// (entry.Local): its write session's staging file, or a committed file
// waiting for its upload, which belongs to the writeback manager and is
// asked for by key on every read (Manager.Content). entry.Local is a
// hint: once the manager has no content for the key, the upload is
// complete and the node takes the bucket's entry (refresh).
type fileNode struct {
	gofs.Inode
	fsys  *FS
	key   keyRef
	ident string

	// headFetched: its lookup just read the file whole (cacheHead); the
	// next open is still a cold open for directory warming.
	headFetched atomic.Bool
	// staleSeen: a read of this version found it changed in the bucket,
	// and the name was looked up again (FS.lookUpStale).
	staleSeen atomic.Bool

	// w is the node's write state (writestate.go), nil for a file only
	// ever read; set once, never cleared.
	w atomic.Pointer[writeState]

	mu    sync.Mutex // guards the fields below, and those of *w
	entry meta.Entry
	base  string // bucket version the local content derives from ("" none: see writeState.last)
	// unlinked: the name went (deleted while open, or replaced by a
	// rename): nothing is uploaded, reads keep what the node held.
	unlinked bool
	ptOpen   int // open handles that name the kernel's backing file (passthrough and shadow handles)
	usOpen   int // open userspace handles
}

var (
	_ gofs.NodeOpener    = (*fileNode)(nil)
	_ gofs.NodeGetattrer = (*fileNode)(nil)
)

func newFileNode(f *FS, key string, e meta.Entry) *fileNode {
	n := &fileNode{fsys: f, ident: e.Version, entry: e}
	if !e.Local {
		n.base = e.Version
	}
	n.key.set(key)
	return n
}

func (n *fileNode) attr(out *fuse.Attr) {
	n.mu.Lock()
	w := n.peekWS()
	e, writing, lw := n.entry, w.session() != nil, w.liveSession()
	n.mu.Unlock()
	if lw != nil {
		// Written by the kernel: the staging file knows its size.
		if size, mtime, err := lw.state(); err == nil {
			e.Size, e.MTime = size, mtime
		}
	} else if e.Local && !writing && n.fsys.wb != nil {
		// Committed content is the manager's: its size, not a copy's.
		if c, ok := n.content(); ok {
			e.Size, e.MTime = c.Size(), c.MTime()
			c.Release()
		}
	}
	n.fsys.fileAttr(e, out)
}

func (n *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer n.fsys.observe("getattr", time.Now(), 0)
	n.attr(&out.Attr)
	out.SetTimeout(n.fsys.timeout())
	return 0
}

const writeFlags = syscall.O_WRONLY | syscall.O_RDWR | syscall.O_TRUNC | syscall.O_APPEND

func (n *fileNode) Open(ctx context.Context, flags uint32) (_ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	f := n.fsys
	defer func(start time.Time) { f.observe("open", start, errno) }(time.Now())
	f.stats.Opens.Add(1)
	n.mu.Lock()
	if h := n.openLiveLocked(flags&writeFlags != 0); h != nil {
		n.mu.Unlock()
		if flags&syscall.O_TRUNC != 0 {
			if errno := n.truncateAtOpen(ctx, h.fileHandle); errno != 0 {
				return nil, 0, errno
			}
		}
		if !h.writable {
			return h, fuse.FOPEN_NOFLUSH, 0
		}
		return h, 0, 0
	}
	if flags&writeFlags != 0 {
		n.mu.Unlock()
		return n.openWrite(ctx, flags&syscall.O_TRUNC != 0)
	}
	if n.peekWS().isShadowed() {
		h := n.openShadowLocked(&fileHandle{n: n})
		n.mu.Unlock()
		return h, shadowOpenFlags | fuse.FOPEN_NOFLUSH, 0
	}
	if n.peekWS().session() == nil && n.entry.Local { // written here: its upload may be complete
		n.mu.Unlock()
		n.settleIfUploaded(ctx)
		n.mu.Lock()
	}
	writing := n.peekWS().session() != nil
	local, committed, e := writing || n.entry.Local, !writing && n.entry.Local, n.entry
	n.mu.Unlock()
	if committed && f.passthrough.Load() {
		if h := n.openCommitted(); h != nil {
			f.stats.PassthroughOpens.Add(1)
			return h, fuse.FOPEN_NOFLUSH, 0
		}
	}
	if local {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.ptOpen > 0 { // the kernel holds a backing file: name it
			return n.openShadowLocked(&fileHandle{n: n}), shadowOpenFlags | fuse.FOPEN_NOFLUSH, 0
		}
		n.usOpen++
		f.stats.UserspaceOpens.Add(1)
		return &fileHandle{n: n}, fuse.FOPEN_NOFLUSH, 0
	}
	obj, err := f.store.Acquire(cache.ObjectKey{Source: f.source, Key: n.key.get(), Version: e.Version, Size: e.Size, MTime: e.MTime})
	if err != nil {
		f.log.Warn("fs: open failed", "key", n.key.get(), "err", err)
		return nil, 0, toErrno(err)
	}
	if coldOpen := n.headFetched.Load() && n.headFetched.Swap(false) || !obj.Complete(); f.warmer != nil && coldOpen && e.Size <= f.fetch.Options().SmallObject {
		dir, name := meta.Parent(n.key.get())
		f.warmer.opened(dir, name)
	}
	// Decided outside the node lock: checking a cached file's CRCs reads it.
	canPT := f.canPassThrough(n, obj)

	n.mu.Lock()
	shadowed := n.peekWS().isShadowed()
	if canPT && !shadowed {
		n.waitWritersReleasedLocked()
		n.awaitBackingFreeLocked()
		shadowed = n.peekWS().isShadowed() // n.mu was released while waiting
	}
	if shadowed { // a writer opened meanwhile
		h := n.openShadowLocked(&fileHandle{n: n, obj: obj, r: f.fetch.NewReader(obj)})
		n.mu.Unlock()
		return h, shadowOpenFlags | fuse.FOPEN_NOFLUSH, 0
	}
	pt := n.ptOpen > 0 || (canPT && n.usOpen == 0 && n.backingFreeLocked())
	if pt {
		n.ptOpen++
	} else {
		n.usOpen++
	}
	n.mu.Unlock()

	// A read-only handle has nothing to flush: NOFLUSH spares close() a
	// round trip to the daemon.
	h := &fileHandle{n: n, obj: obj, pt: pt}
	if pt {
		f.stats.PassthroughOpens.Add(1)
		// The kernel reads the file without asking: the open is the hit.
		f.fetch.CountOpenHit(obj)
		return &passthroughHandle{h}, fuse.FOPEN_NOFLUSH, 0
	}
	f.stats.UserspaceOpens.Add(1)
	h.r = f.fetch.NewReader(obj)
	// Each inode version is immutable: its page cache stays valid.
	return h, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
}

// settleIfUploaded moves a node written on this mount (Open calls it for
// a local entry with no session, so other opens pay nothing) whose upload
// is complete to the bucket's version (the namespace has it before the
// manager lets go of the content), so that the open is served as any
// cached object is: by passthrough, from the cache file the upload left.
func (n *fileNode) settleIfUploaded(ctx context.Context) {
	if n.fsys.wb == nil {
		return
	}
	if c, ok := n.content(); ok {
		// Pending, or landed and still becoming the cached copy: the open
		// is served from the committed bytes (openCommitted: passthrough
		// on the staged file, which stays valid when it moves).
		c.Release()
		return
	}
	// On error the node stays local; its reads refresh it as they can.
	_, _ = n.refresh(ctx)
}

// fileHandle serves one open file from userspace: from the cache (obj),
// or from local content while the node has any.
//
// A handle reads its node's content as it is now, as every descriptor of
// a file on local disk does: obj is the version the node stood for when
// the handle last read the bucket's copy, and moves on with the node (its
// own upload landing, a rename that copied it). A version changed in the
// bucket by someone else is a new node (see doc.go), never this one, so
// that handles keep reading the bytes they opened.
type fileHandle struct {
	n        *fileNode
	obj      *cache.Object // nil for a handle opened on local content
	pt       bool
	writable bool
	// swapMu guards obj and r (set at open, then by renewReader): held
	// shared by a read through r, exclusively to replace them, so that
	// the old version is released with no read on it.
	swapMu sync.RWMutex
	r      *prefetch.Reader
}

var (
	_ gofs.FileReader   = (*fileHandle)(nil)
	_ gofs.FileReleaser = (*fileHandle)(nil)
)

func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (_ fuse.ReadResult, errno syscall.Errno) {
	f := h.n.fsys
	defer func(start time.Time) { f.observe("read", start, errno) }(time.Now())
	f.stats.Reads.Add(1)
	n, err, handled := h.n.readLocal(dest, off)
	if !handled {
		var rerr error
		if n, err, rerr = h.readBucketCopy(ctx, dest, off); rerr != nil {
			return nil, toErrno(rerr)
		}
	}
	if err != nil {
		f.stats.ReadErrors.Add(1)
		errno := readErrno(err)
		if key := h.n.key.get(); errno == syscall.ESTALE {
			if h.n.staleSeen.CompareAndSwap(false, true) {
				f.log.Warn("fs: read failed (ESTALE): the object changed in the bucket since this version of the file was looked up; "+f.lookUpStale(ctx, key), "key", key, "off", off, "err", err)
			} else {
				f.log.Debug("fs: read failed (ESTALE)", "key", key, "off", off, "err", err)
			}
		} else if errors.Is(err, prefetch.ErrBackendDown) {
			// Failed at once by the breaker: the outage was logged when
			// it was found, not once per read (prefetch.ErrBackendDown).
			f.log.Debug("fs: read failed", "key", key, "off", off, "err", err)
		} else {
			f.log.Warn("fs: read failed", "key", key, "off", off, "err", err)
		}
		return nil, errno
	}
	f.stats.ReadBytes.Add(int64(n))
	return fuse.ReadResultData(dest[:n]), 0
}

// readBucketCopy reads the node's bucket version through the handle's
// cache reader (rerr: no reader could be made). The kernel reads one
// handle concurrently: reads share swapMu, and the one that finds the
// node moved on replaces the reader once no read is on the old one.
func (h *fileHandle) readBucketCopy(ctx context.Context, dest []byte, off int64) (n int, err, rerr error) {
	h.swapMu.RLock()
	r := h.currentReader()
	if r == nil {
		h.swapMu.RUnlock()
		h.swapMu.Lock()
		rerr = h.renewReader(ctx)
		h.swapMu.Unlock()
		if rerr != nil {
			return 0, nil, rerr
		}
		// Whatever reader is in place while swapMu is held shared stays
		// valid: another read may have renewed it again meanwhile.
		h.swapMu.RLock()
		r = h.r
	}
	n, err = r.ReadAt(ctx, dest, off)
	h.swapMu.RUnlock()
	return n, err, nil
}

// currentReader returns the handle's reader if it reads the node's
// current version; nil if there is none yet (a handle opened on local
// content since uploaded, a passthrough handle the kernel did not pass
// through) or the node moved on. Caller holds swapMu.
func (h *fileHandle) currentReader() *prefetch.Reader {
	if h.r == nil || !h.n.standsFor(h.obj) {
		return nil
	}
	return h.r
}

// renewReader makes the handle's reader on the node's current version,
// releasing the one it replaces, unless another read just did. Caller
// holds swapMu exclusively: no read is on the old one.
func (h *fileHandle) renewReader(ctx context.Context) error {
	if h.currentReader() != nil {
		return nil
	}
	obj := h.obj
	if obj == nil || !h.n.standsFor(obj) {
		var err error
		if obj, err = h.n.acquireCurrent(ctx); err != nil {
			return err
		}
	}
	old := h.obj
	h.obj, h.r = obj, h.n.fsys.fetch.NewReader(obj)
	if old != nil && old != obj {
		old.Release()
	}
	return nil
}

// standsFor reports whether the node reads as obj: its entry is the
// bucket's copy obj holds (not local content, whose upload may have
// landed since: acquireCurrent refreshes it).
func (n *fileNode) standsFor(obj *cache.Object) bool {
	if obj == nil {
		return false
	}
	k := obj.Key()
	n.mu.Lock()
	local, version := n.entry.Local, n.entry.Version
	n.mu.Unlock()
	return !local && k.Version == version && k.Key == n.key.get()
}

// acquireCurrent opens the cache entry of the node's current bucket
// version (after its upload: see refresh).
func (n *fileNode) acquireCurrent(ctx context.Context) (*cache.Object, error) {
	n.mu.Lock()
	e := n.entry
	n.mu.Unlock()
	if e.Local {
		var err error
		if e, err = n.refresh(ctx); err != nil {
			return nil, err
		}
	}
	f := n.fsys
	return f.store.Acquire(cache.ObjectKey{Source: f.source, Key: n.key.get(), Version: e.Version, Size: e.Size, MTime: e.MTime})
}

func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	defer h.n.fsys.observe("release", time.Now(), 0)
	h.n.release(h)
	h.swapMu.Lock()
	obj := h.obj
	h.swapMu.Unlock()
	if obj != nil {
		obj.Release()
	}
	if releaseHook != nil {
		releaseHook(h.n)
	}
	return 0
}

// releaseHook, if set (by tests), runs at the end of every handle's
// Release: where go-fuse has not yet let go of the node's backing
// registration.
var releaseHook func(*fileNode)

// passthroughHandle is a fileHandle whose cache file the kernel reads
// directly. go-fuse registers the descriptor once per inode and reuses it
// for every passthrough open of that inode.
type passthroughHandle struct{ *fileHandle }

var _ gofs.FilePassthroughFder = (*passthroughHandle)(nil)

func (h *passthroughHandle) PassthroughFd() (int, bool) {
	fd, err := h.obj.Fd()
	if err != nil {
		h.n.fsys.log.Warn("fs: passthrough fd", "key", h.n.key.get(), "err", err)
		return -1, false
	}
	h.n.fsys.holds.asking(h.n)
	return fd, true
}

// committedHandle is a passthrough open of a file written on this mount
// whose upload is still pending: the kernel reads the committed staging
// file (torch.load right after an async torch.save). A committed file
// never changes (a new write session copies it), and the descriptor
// stays valid when the upload moves the file into the cache or a rename
// moves it aside. The handle holds the content until it is released.
type committedHandle struct {
	*fileHandle
	c *writeback.Content
}

var (
	_ gofs.FilePassthroughFder = (*committedHandle)(nil)
	_ gofs.FileReleaser        = (*committedHandle)(nil)
)

// openCommitted opens the node's committed content for passthrough, or
// returns nil when it cannot: the upload is done (the content is gone),
// a write session started, or a userspace handle is open (the kernel
// does not mix the two on one inode).
func (n *fileNode) openCommitted() *committedHandle {
	c, ok := n.content()
	if !ok {
		return nil
	}
	n.mu.Lock()
	n.waitWritersReleasedLocked()
	n.awaitBackingFreeLocked()
	w := n.peekWS()
	pt := w.session() == nil && !w.isShadowed() && (n.ptOpen > 0 || n.usOpen == 0 && n.backingFreeLocked())
	if pt {
		n.ptOpen++
	}
	n.mu.Unlock()
	if !pt {
		c.Release()
		return nil
	}
	return &committedHandle{fileHandle: &fileHandle{n: n, pt: true}, c: c}
}

func (h *committedHandle) PassthroughFd() (int, bool) {
	h.n.fsys.holds.asking(h.n)
	return int(h.c.File().Fd()), true
}

func (h *committedHandle) Release(ctx context.Context) syscall.Errno {
	errno := h.fileHandle.Release(ctx)
	h.c.Release()
	return errno
}
