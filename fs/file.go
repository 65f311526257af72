package fs

import (
	"context"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/prefetch"
)

// fileNode is one version of one object.
type fileNode struct {
	gofs.Inode
	fsys  *FS
	key   string
	entry meta.Entry

	mu     sync.Mutex // guards ptOpen, usOpen
	ptOpen int        // open passthrough handles
	usOpen int        // open userspace handles
}

var (
	_ gofs.NodeOpener    = (*fileNode)(nil)
	_ gofs.NodeGetattrer = (*fileNode)(nil)
)

func (n *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer n.fsys.observe("getattr", time.Now(), 0)
	n.fsys.fileAttr(n.entry, &out.Attr)
	out.SetTimeout(n.fsys.timeout())
	return 0
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (_ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	f := n.fsys
	defer func(start time.Time) { f.observe("open", start, errno) }(time.Now())
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	f.stats.Opens.Add(1)
	obj, err := f.store.Acquire(cache.ObjectKey{
		Source: f.source, Key: n.key, Version: n.entry.Version, Size: n.entry.Size, MTime: n.entry.MTime,
	})
	if err != nil {
		f.log.Warn("fs: open failed", "key", n.key, "err", err)
		return nil, 0, toErrno(err)
	}
	// Decide passthrough outside the node lock: checking a cached file's
	// CRCs reads it.
	canPT := f.passthrough.Load() && obj.Complete()
	if canPT && !obj.Verified() && obj.Size() <= f.opts.VerifyOnOpen {
		if _, err := obj.Verify(); err != nil {
			f.log.Warn("fs: verifying cached file", "key", n.key, "err", err)
		}
	}
	canPT = canPT && obj.Verified()

	n.mu.Lock()
	pt := n.ptOpen > 0 || (canPT && n.usOpen == 0)
	if pt {
		n.ptOpen++
	} else {
		n.usOpen++
	}
	n.mu.Unlock()

	h := &fileHandle{n: n, obj: obj, pt: pt}
	if pt {
		f.stats.PassthroughOpens.Add(1)
		return &passthroughHandle{h}, 0, 0
	}
	h.r = f.fetch.NewReader(obj)
	// Each inode is one immutable version: its page cache stays valid.
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// fileHandle serves reads of one open file from userspace.
type fileHandle struct {
	n    *fileNode
	obj  *cache.Object
	pt   bool
	once sync.Once
	r    *prefetch.Reader
}

var (
	_ gofs.FileReader   = (*fileHandle)(nil)
	_ gofs.FileReleaser = (*fileHandle)(nil)
)

func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (_ fuse.ReadResult, errno syscall.Errno) {
	f := h.n.fsys
	defer func(start time.Time) { f.observe("read", start, errno) }(time.Now())
	f.stats.Reads.Add(1)
	h.once.Do(func() {
		if h.r == nil { // a passthrough handle the kernel did not pass through
			h.r = f.fetch.NewReader(h.obj)
		}
	})
	n, err := h.r.ReadAt(ctx, dest, off)
	if err != nil {
		f.stats.ReadErrors.Add(1)
		f.log.Warn("fs: read failed", "key", h.n.key, "off", off, "err", err)
		return nil, toErrno(err)
	}
	f.stats.ReadBytes.Add(int64(n))
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	defer h.n.fsys.observe("release", time.Now(), 0)
	h.n.mu.Lock()
	if h.pt {
		h.n.ptOpen--
	} else {
		h.n.usOpen--
	}
	h.n.mu.Unlock()
	h.obj.Release()
	return 0
}

// passthroughHandle is a fileHandle whose cache file the kernel reads
// directly. go-fuse registers the descriptor once per inode and reuses it
// for every passthrough open of that inode.
type passthroughHandle struct{ *fileHandle }

var _ gofs.FilePassthroughFder = (*passthroughHandle)(nil)

func (h *passthroughHandle) PassthroughFd() (int, bool) {
	fd, err := h.obj.Fd()
	if err != nil {
		h.n.fsys.log.Warn("fs: passthrough fd", "key", h.n.key, "err", err)
		return -1, false
	}
	return fd, true
}
