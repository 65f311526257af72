package fs

import (
	"context"
	"errors"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
)

// dirNode is a directory: a key prefix ("" or ending in "/").
type dirNode struct {
	gofs.Inode
	fsys *FS
	key  keyRef
}

func newDirNode(f *FS, key string) *dirNode {
	d := &dirNode{fsys: f}
	d.key.set(key)
	return d
}

var (
	_ gofs.NodeLookuper       = (*dirNode)(nil)
	_ gofs.NodeGetattrer      = (*dirNode)(nil)
	_ gofs.NodeOpendirHandler = (*dirNode)(nil)
	_ gofs.NodeStatfser       = (*dirNode)(nil)
)

func (d *dirNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer d.fsys.observe("getattr", time.Now(), 0)
	d.fsys.dirAttr(&out.Attr)
	out.SetTimeout(d.fsys.timeout())
	return 0
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer func(start time.Time) { d.fsys.observe("lookup", start, errno) }(time.Now())
	d.fsys.stats.Lookups.Add(1)
	if errno := checkNames(name); errno != 0 {
		return nil, errno
	}
	if d.fsys.cannotExist(name) {
		return nil, syscall.ENOENT
	}
	e, lease, err := d.fsys.meta.LookupLease(uninterrupted(ctx), d.key.get(), name)
	if err != nil {
		if !errors.Is(err, backend.ErrNotExist) {
			d.fsys.log.Warn("fs: lookup failed", "dir", d.key.get(), "name", name, "err", err)
		}
		return nil, toErrno(err)
	}
	fetched := !e.Dir && d.fsys.cacheHead(meta.Join(d.key.get(), e.Name, false), e)
	ch := d.child(ctx, e, lease, out)
	if fn, ok := ch.Operations().(*fileNode); ok && fetched {
		fn.headFetched.Store(true)
	}
	return ch, 0
}

// cacheHead caches the content the lookup of e read with its metadata
// (meta.TakeHead: a small file found by a GET of its first bytes), so the
// open that usually follows needs no request. Its block counts as
// prefetched: reading it is not a cache hit. It reports whether it
// cached the file.
func (f *FS) cacheHead(key string, e meta.Entry) bool {
	data := f.meta.TakeHead(key, e.Version)
	if data == nil {
		return false
	}
	f.fetch.CountLookupFetch(int64(len(data)))
	obj, err := f.store.Acquire(cache.ObjectKey{Source: f.source, Key: key, Version: e.Version, Size: e.Size, MTime: e.MTime})
	if err != nil {
		return false
	}
	defer obj.Release()
	if obj.NumBlocks() != 1 {
		return false
	}
	return f.fetch.Deliver(obj, 0, data)
}

// child makes (or finds) the inode of entry e and fills out; the kernel
// may keep it for what is left of its metadata's TTL (lease).
func (d *dirNode) child(ctx context.Context, e meta.Entry, lease time.Duration, out *fuse.EntryOut) *gofs.Inode {
	f := d.fsys
	var node gofs.InodeEmbedder
	var attr gofs.StableAttr
	if e.Dir {
		key := meta.Join(d.key.get(), e.Name, true)
		node = newDirNode(f, key)
		attr = gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: d.subdirIno(e.Name, key)}
		f.dirAttr(&out.Attr)
	} else {
		key := meta.Join(d.key.get(), e.Name, false)
		ino, known := f.fileNodeOf(d, e.Name, e)
		attr = gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino}
		node = newFileNode(f, key, e)
		if known != nil {
			// go-fuse keeps the node the kernel has under this number
			// and drops the one made here: answer with what the kept one
			// knows (a node the kernel forgot, still tracked for its
			// pending upload, knows the file as well). A file being
			// written is larger than e says; given e's size, the kernel
			// would cut its own, and the next O_APPEND write would land
			// there, over what was written.
			known.attr(&out.Attr)
		} else {
			f.fileAttr(e, &out.Attr)
		}
	}
	out.Ino = attr.Ino
	out.SetEntryTimeout(f.entryTimeout(lease))
	out.SetAttrTimeout(f.entryTimeout(lease))
	return d.NewInode(ctx, node, attr)
}

func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	defer d.fsys.observe("opendir", time.Now(), 0)
	lctx := uninterrupted(ctx)
	return &dirHandle{d: d, r: d.fsys.meta.OpenDir(lctx, d.key.get()), ctx: lctx}, 0, 0
}

func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	// Object stores have no capacity to report; show the cache's, so
	// df says something useful about the node.
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.fsys.store.Dir(), &st); err != nil {
		return toErrno(err)
	}
	out.FromStatfsT(&st)
	out.NameLen = meta.MaxNameLen
	return 0
}

// dirHandle streams a directory's entries from the metadata cache.
type dirHandle struct {
	d   *dirNode
	r   *meta.Reader
	pos uint64 // entries returned so far
	// ctx lists the directory for the handle's lifetime: made once at
	// opendir (not per entry: Readdirent runs once per entry), free of
	// the request's interrupts (see uninterrupted).
	ctx context.Context
}

var (
	_ gofs.FileReaddirenter = (*dirHandle)(nil)
	_ gofs.FileLookuper     = (*dirHandle)(nil)
	_ gofs.FileSeekdirer    = (*dirHandle)(nil)
	_ gofs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if h.pos < dots {
		h.pos++
		return h.d.dot(h.pos == 1), 0
	}
	e, ok, err := h.r.Next(h.ctx)
	if err != nil {
		h.d.fsys.log.Warn("fs: readdir failed", "dir", h.d.key.get(), "err", err)
		h.d.fsys.observe("readdir", time.Now(), toErrno(err))
		return nil, toErrno(err)
	}
	if !ok {
		return nil, 0
	}
	h.pos++
	de := &fuse.DirEntry{Name: e.Name, Mode: syscall.S_IFREG}
	if e.Dir {
		de.Mode = syscall.S_IFDIR
		de.Ino = h.d.subdirIno(e.Name, meta.Join(h.d.key.get(), e.Name, true))
	} else {
		de.Ino = h.d.fsys.fileIno(h.d, e.Name, e)
	}
	return de, 0
}

// dots is how many entries a listing starts with: "." and "..", as local
// filesystems list them (file managers take a directory's own entry from
// its listing; POSIX leaves it to the filesystem).
const dots = 2

// dot is the directory's "." entry (self), or its ".." (the root's is
// itself). go-fuse looks neither up for readdirplus.
func (d *dirNode) dot(self bool) *fuse.DirEntry {
	in, name := d.EmbeddedInode(), "."
	if !self {
		name = ".."
		if _, p := d.Parent(); p != nil {
			in = p
		}
	}
	return &fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: in.StableAttr().Ino}
}

// Lookup answers readdirplus from the entry just streamed, without another
// trip to the metadata cache.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e, lease, ok := h.r.Lookup(name); ok {
		return h.d.child(ctx, e, lease, out), 0
	}
	return h.d.Lookup(ctx, name, out)
}

// Seekdir supports rewinddir and seekdir to an offset the stream handed
// out (offsets count entries).
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.r.Rewind()
	h.pos = min(off, dots)
	for h.pos < off {
		if _, ok, err := h.r.Next(h.ctx); err != nil {
			return toErrno(err)
		} else if !ok {
			break
		}
		h.pos++
	}
	return 0
}

// Fsyncdir makes the directory's names as durable as a close is in this
// mode (writeback.Manager.SyncDir): with --upload sync, every upload
// committed under it, a renamed file's included, is in the bucket; with
// --upload async, its renames and deletions are synced in the journal.
// Creates, mkdir, rmdir, and renames and deletions of uploaded files are
// bucket requests done before their call returned. Without it the
// atomic-write pattern (write, fsync, rename, fsync the directory) failed
// with EOPNOTSUPP.
func (h *dirHandle) Fsyncdir(ctx context.Context, flags uint32) (errno syscall.Errno) {
	f := h.d.fsys
	defer func(start time.Time) { f.observe("fsyncdir", start, errno) }(time.Now())
	if f.wb == nil {
		return 0 // read-only: nothing of ours to make durable
	}
	dir := h.d.key.get()
	if err := f.wb.SyncDir(context.WithoutCancel(ctx), dir); err != nil { // as Flush and Fsync
		f.log.Warn("fs: fsync of a directory failed", "dir", dir, "err", err)
		return toErrno(err)
	}
	return 0
}
