package fs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

var (
	_ gofs.NodeCreater   = (*dirNode)(nil)
	_ gofs.NodeMkdirer   = (*dirNode)(nil)
	_ gofs.NodeUnlinker  = (*dirNode)(nil)
	_ gofs.NodeRmdirer   = (*dirNode)(nil)
	_ gofs.NodeRenamer   = (*dirNode)(nil)
	_ gofs.NodeSetattrer = (*dirNode)(nil)
)

// checkNames refuses, with ENAMETOOLONG, a name over meta.MaxNameLen
// bytes, before anything is asked of the bucket: a listing would skip
// such a key (so the file would vanish at the next mount), and S3-like
// stores may refuse it outright, leaving an upload that can never land.
func checkNames(names ...string) syscall.Errno {
	for _, n := range names {
		if len(n) > meta.MaxNameLen {
			return toErrno(errNameTooLong)
		}
	}
	return 0
}

// checkKey refuses a key the bucket cannot store: longer than
// Options.MaxKeyLen (ENAMETOOLONG), or not UTF-8 where keys must be
// (EILSEQ). The store would refuse its upload for good (S3's
// KeyTooLongError, a 400 for the bytes), after the writer had been told
// its file was created.
func (f *FS) checkKey(key string) syscall.Errno {
	if f.opts.MaxKeyLen > 0 && len(key) > f.opts.MaxKeyLen {
		return syscall.ENAMETOOLONG
	}
	if f.opts.UTF8Keys && !utf8.ValidString(key) {
		return syscall.EILSEQ
	}
	if f.opts.KeyForbids != "" && strings.ContainsAny(key, f.opts.KeyForbids) {
		return syscall.EINVAL
	}
	return 0
}

// cannotExist reports a name no key of the bucket can hold (not UTF-8
// where keys are): looking it up, removing it or renaming it answers
// ENOENT without a request, which the store would refuse with a 400.
// (KeyForbids is checked on new keys only: a store that does hold such a
// key, as GCS's emulator does, still serves it.)
func (f *FS) cannotExist(name string) bool {
	return f.opts.UTF8Keys && !utf8.ValidString(name)
}

func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (_ *gofs.Inode, _ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	ctx = uninterrupted(ctx) // as Mkdir: its lookup of the name must not fail with EINTR
	f := d.fsys
	defer func(start time.Time) { f.observe("create", start, errno) }(time.Now())
	if f.wb == nil {
		return nil, nil, 0, syscall.EROFS
	}
	if errno := checkNames(name); errno != 0 {
		return nil, nil, 0, errno
	}
	key := d.key.get() + name
	if errno := f.checkKey(key); errno != 0 {
		return nil, nil, 0, errno
	}
	st, err := f.wb.NewStaging(key)
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	e := meta.Entry{Name: name, MTime: time.Now().UnixNano(), Version: "local:" + st.Name(), Local: true}
	n := newFileNode(f, key, e)
	n.base = backend.VersionAbsent // created here: the upload must not replace someone else's
	w := n.ws()
	w.sess, w.writers = st, 1 // no StartFrom: the session creates the file
	st.MarkDirty()
	// Creating is new data: the creator's close publishes the (maybe
	// empty) new file, as `touch` expects.
	markWrote(st, n.ownerOf(callerPid(ctx)))
	var h gofs.FileHandle
	if f.passthroughWrites() {
		if lh := f.startLive(n, st); lh != nil {
			h = lh // the kernel writes the staging file itself (ptwrite.go)
			f.stats.PassthroughOpens.Add(1)
		}
	}
	if h == nil {
		n.usOpen = 1
		h = &fileHandle{n: n, writable: true}
		f.stats.UserspaceOpens.Add(1)
	}
	f.trackLocal(n, key, e)
	f.fileAttr(e, &out.Attr)
	out.SetEntryTimeout(f.timeout())
	out.SetAttrTimeout(f.timeout())
	ch := d.NewInode(ctx, n, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: f.inoFor('f', key, e.Version)})
	f.stats.Opens.Add(1)
	return ch, h, 0, 0
}

func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	ctx = uninterrupted(ctx) // a signal the caller handles must not make its marker fail (EINTR)
	f := d.fsys
	defer func(start time.Time) { f.observe("mkdir", start, errno) }(time.Now())
	if f.wb == nil {
		return nil, syscall.EROFS
	}
	if errno := checkNames(name); errno != 0 {
		return nil, errno
	}
	key := d.key.get() + name + "/"
	if errno := f.checkKey(key); errno != 0 {
		return nil, errno
	}
	// Object stores have no directories: a zero-byte "name/" marker keeps
	// an empty one in the tree (as the S3 console and gcsfuse do).
	// The new directory is listed beside the put (a round trip of its
	// own, not after it): the creates that follow in it, a checkpoint's
	// files, are then answered from that listing rather than each asking
	// the bucket about its name. Keys someone else wrote under the name
	// show up in it.
	listed := f.meta.ListAhead(key)
	w, _ := f.be.(backend.Writer)
	if _, err := w.Put(ctx, key, bytes.NewReader(nil), 0, backend.PutOptions{}); err != nil {
		f.log.Warn("fs: mkdir failed", "key", key, "err", err)
		return nil, toErrno(err)
	}
	f.meta.Upsert(d.key.get(), meta.Entry{Name: name, Dir: true})
	// Bounded: the listing only saves requests, and a slow one goes on in
	// the background while mkdir returns.
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := listed(wctx); err != nil {
		// Lookups in it then ask the bucket, as before.
		f.log.Debug("fs: listing a new directory", "key", key, "err", err)
	}
	f.dirAttr(&out.Attr)
	out.SetEntryTimeout(f.timeout())
	out.SetAttrTimeout(f.timeout())
	// A new directory: a renamed one's record at its key (removed by
	// another client of the bucket since) would number it anew at the
	// next lookup.
	f.inos.dirGone(key)
	return d.NewInode(ctx, newDirNode(f, key), gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: f.inoFor('d', key, "")}), 0
}

func (d *dirNode) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	ctx = uninterrupted(ctx) // the bucket must not be left half-changed by a signal
	f := d.fsys
	defer func(start time.Time) { f.observe("unlink", start, errno) }(time.Now())
	if f.wb == nil {
		return syscall.EROFS
	}
	if errno := checkNames(name); errno != 0 {
		return errno
	}
	if f.cannotExist(name) {
		return syscall.ENOENT
	}
	key := d.key.get() + name
	for _, n := range f.replaced(d, name) {
		n.markUnlinked()
	}
	f.wb.Cancel(key)
	// An upload already in the bucket settles first, so its namespace
	// update cannot bring the name back after ours.
	if err := f.wb.WaitLanded(ctx, key); err != nil {
		return toErrno(err)
	}
	if err := f.deleteObject(ctx, key); err != nil {
		return toErrno(err)
	}
	f.meta.ClearLocal(d.key.get(), name)
	f.meta.Remove(d.key.get(), name)
	return 0
}

// replaced returns the nodes whose name an unlink or a rename over it
// ends: the kernel's inode of the name, and the node holding the key's
// local content, when that is another inode (the kernel looked the name
// up again after the upload landed, and got the bucket's version as a new
// inode, while a process still holds the first).
func (f *FS) replaced(d *dirNode, name string) []*fileNode {
	var ns []*fileNode
	if ch := d.GetChild(name); ch != nil {
		if n, ok := ch.Operations().(*fileNode); ok {
			ns = append(ns, n)
		}
	}
	f.mu.Lock()
	n := f.files[d.key.get()+name]
	f.mu.Unlock()
	if n != nil && (len(ns) == 0 || ns[0] != n) {
		ns = append(ns, n)
	}
	return ns
}

// orphanGrace is how long a gone file's committed bytes are kept for the
// opens that come after its name went (cache.ReplacedGrace; shortened by
// tests).
var orphanGrace = cache.ReplacedGrace

// markUnlinked stops the node from uploading anything: its name is gone
// (an unlink, a rename over it). Called before the manager cancels the
// key's uploads, it keeps the committed content the node has (see
// content).
func (n *fileNode) markUnlinked() {
	var c *writeback.Content
	if n.fsys.wb != nil {
		c, _ = n.fsys.wb.Content(n.key.get())
	}
	n.mu.Lock()
	n.unlinked = true
	if w := n.peekWS(); w.session() != nil {
		w.sess.Orphan() // its writers go on; the name is another file's
	}
	if w := n.peekWS(); c != nil && w.session() == nil && n.entry.Local && (w == nil || w.orphan == nil) {
		n.ws().orphan, c = c, nil // committed content: keep it (a node only read has none)
		time.AfterFunc(orphanGrace, n.dropOrphan)
	}
	version, pin := n.pinnableLocked()
	e := n.entry
	n.mu.Unlock()
	c.Release()
	if pin && version == "" {
		// A local entry whose upload, another inode's of the name (the
		// kernel forgot the writer's), has landed: the name's entry in
		// the namespace is that version, until the caller changes it.
		dir, name := meta.Parent(n.key.get())
		if k, ok := n.fsys.meta.Known(dir, name); ok && !k.Local && !k.Dir && k.Size == e.Size {
			version = k.Version
		}
	}
	if pin && version != "" {
		n.pinGoneVersion(e, version)
	}
	n.fsys.untrack(n.key.get(), n)
}

// pinnableLocked reports whether a node whose name just went needs its
// bucket version kept (descriptors hold it and nothing else keeps its
// bytes: no session, no committed content), and which version it is: the
// one the bucket had, or the one its own upload made ("" when the node
// does not know it). Caller holds n.mu.
func (n *fileNode) pinnableLocked() (string, bool) {
	w := n.peekWS()
	if n.usOpen+n.ptOpen == 0 || w.session() != nil || (w != nil && (w.orphan != nil || w.gonePin != nil)) {
		return "", false
	}
	if !n.entry.Local {
		return n.entry.Version, n.entry.Version != ""
	}
	v, _ := w.ownJob().Landed()
	return v, true
}

// pinGoneVersion keeps the cached copy of version (if the cache has it)
// for the node's descriptors, until the last of them is released: the
// bucket no longer has it once the name went, and the cache retires a
// replaced version after its grace, or evicts it.
func (n *fileNode) pinGoneVersion(e meta.Entry, version string) {
	f := n.fsys
	obj, err := f.store.AcquireCached(cache.ObjectKey{Source: f.source, Key: n.key.get(), Version: version, Size: e.Size, MTime: e.MTime})
	if err != nil {
		return // not cached: its descriptors read what they can from the bucket
	}
	n.mu.Lock()
	if w := n.ws(); w.gonePin == nil && n.usOpen+n.ptOpen > 0 {
		w.gonePin, obj = obj, nil
		if n.entry.Local && w.session() == nil {
			// A local entry whose upload landed: it is that version now
			// (as refresh makes a node whose own upload landed).
			n.entry.Local, n.entry.Version, n.base = false, version, version
		}
	}
	n.mu.Unlock()
	if obj != nil {
		obj.Release() // released meanwhile, or pinned by another call
	}
}

// content returns the node's committed content, if it has any: the
// manager's for its key until the upload is complete, or, once the name
// is gone, what it had then. A reader that looked the file up just
// before another process renamed a file over it, or deleted it, opens
// the inode it found right after; on local disk it reads that file's
// bytes, and so it does here for cache.ReplacedGrace, not the bytes of
// whatever took the name (nor ESTALE: the bucket never had them).
//
// A node whose name still stands reads the key's newest content, as every
// descriptor of a file on local disk sees the file's latest writes, also
// ones made through another inode of the name (a lookup after its upload
// landed may make one, see fileIno).
func (n *fileNode) content() (*writeback.Content, bool) {
	n.mu.Lock()
	var c *writeback.Content
	if w := n.peekWS(); w != nil {
		c = w.orphan.Acquire()
	}
	gone := n.unlinked
	n.mu.Unlock()
	switch {
	case c != nil:
		return c, true
	case gone || n.fsys.wb == nil:
		return nil, false
	}
	return n.fsys.wb.Content(n.key.get())
}

// dropOrphan lets a gone file's committed bytes go once orphanGrace has
// passed, unless descriptors still hold the file: as on local disk, it
// lives on for them, and its bytes go at the last release
// (discardIfGone).
func (n *fileNode) dropOrphan() {
	n.mu.Lock()
	w := n.ws() // it has one: markUnlinked set orphan
	if n.usOpen > 0 || n.ptOpen > 0 {
		w.orphanHeld = true
		n.mu.Unlock()
		return
	}
	c := w.orphan
	w.orphan = nil
	n.mu.Unlock()
	c.Release()
}

// deleteObject removes key from the bucket (a missing key is fine).
func (f *FS) deleteObject(ctx context.Context, key string) error {
	del, ok := f.be.(backend.Deleter)
	if !ok {
		return backend.ErrNotSupported
	}
	if err := del.Delete(ctx, key); err != nil {
		f.log.Warn("fs: delete failed", "key", key, "err", err)
		return err
	}
	return nil
}

func (d *dirNode) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	ctx = uninterrupted(ctx) // the bucket must not be left half-changed by a signal
	f := d.fsys
	defer func(start time.Time) { f.observe("rmdir", start, errno) }(time.Now())
	if f.wb == nil {
		return syscall.EROFS
	}
	if errno := checkNames(name); errno != 0 {
		return errno
	}
	if f.cannotExist(name) {
		return syscall.ENOENT
	}
	prefix := d.key.get() + name + "/"
	empty, err := f.dirEmpty(ctx, prefix)
	if err != nil {
		return toErrno(err)
	}
	if !empty {
		return syscall.ENOTEMPTY
	}
	if err := f.deleteObject(ctx, prefix); err != nil {
		return toErrno(err)
	}
	f.meta.Remove(d.key.get(), name)
	f.meta.Invalidate(prefix)
	f.inos.dirGone(prefix)
	return 0
}

// dirEmpty reports whether nothing but its own marker lives under prefix,
// in the bucket or written here and not yet uploaded. An object of a file
// deleted or renamed while its upload ran, there until the uploader takes
// it back down (meta's Hidden), does not count: the directory is empty
// for its users, as on local disk (`rm -rf` of a checkpoint whose uploads
// are in flight).
func (f *FS) dirEmpty(ctx context.Context, prefix string) (bool, error) {
	if f.meta.HasLocal(prefix) {
		return false, nil
	}
	opt := backend.ListOptions{Limit: 2}
	for {
		page, err := f.be.List(ctx, prefix, opt)
		if err != nil {
			return false, err
		}
		for _, p := range page.Prefixes {
			if !f.meta.HiddenUnder(p) {
				return false, nil
			}
			if empty, err := f.onlyHiddenUnder(ctx, p); err != nil || !empty {
				return false, err
			}
		}
		for _, o := range page.Objects {
			if o.Key != prefix && !f.meta.Hidden(o.Key) {
				return false, nil
			}
		}
		if page.Next == "" {
			return true, nil
		}
		opt.Token = page.Next // only the marker and hidden objects so far
	}
}

// onlyHiddenUnder reports whether the bucket holds nothing under prefix
// but hidden objects (a subdirectory removed while its file's upload was
// in flight: its prefix lists until that object is taken down), and
// nothing local is there.
func (f *FS) onlyHiddenUnder(ctx context.Context, prefix string) (bool, error) {
	if f.meta.HasLocal(prefix) {
		return false, nil
	}
	opt := backend.ListOptions{Recursive: true, Limit: 100}
	for {
		page, err := f.be.List(ctx, prefix, opt)
		if err != nil {
			return false, err
		}
		for _, o := range page.Objects {
			if !f.meta.Hidden(o.Key) {
				return false, nil
			}
		}
		if page.Next == "" {
			return true, nil
		}
		opt.Token = page.Next
	}
}

// Setattr on a directory: nothing to store (directories are prefixes).
func (d *dirNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	d.fsys.dirAttr(&out.Attr)
	out.Ino = d.StableAttr().Ino // see the fileNode's
	out.SetTimeout(d.fsys.timeout())
	return 0
}

// renameNoReplace and renameExchange are renameat2 flags.
const (
	renameNoReplace = 0x1
	renameExchange  = 0x2
)

func (d *dirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	ctx = uninterrupted(ctx) // the bucket must not be left half-changed by a signal
	f := d.fsys
	defer func(start time.Time) { f.observe("rename", start, errno) }(time.Now())
	if f.wb == nil {
		return syscall.EROFS
	}
	if errno := checkNames(name, newName); errno != 0 {
		return errno
	}
	if f.cannotExist(name) {
		return syscall.ENOENT
	}
	nd, ok := newParent.(*dirNode)
	if !ok || flags&renameExchange != 0 {
		return syscall.EINVAL
	}
	// The new name as a key, before any request (a directory's files are
	// checked by renameDir).
	if errno := f.checkKey(nd.key.get() + newName); errno != 0 {
		return errno
	}
	src, err := f.meta.Lookup(ctx, d.key.get(), name)
	if err != nil {
		return toErrno(err)
	}
	// A name renamed onto itself stays as it is (rename(2)). The kernel
	// leaves such a call to us when its two lookups found different
	// dentries; taken as a move, the file would replace itself: its
	// upload cancelled, its object deleted.
	if nd == d && newName == name {
		if flags&renameNoReplace != 0 {
			return syscall.EEXIST
		}
		return 0
	}
	dst, derr := f.meta.Lookup(ctx, nd.key.get(), newName)
	exists := derr == nil
	if derr != nil && !errors.Is(derr, backend.ErrNotExist) {
		return toErrno(derr)
	}
	if exists && flags&renameNoReplace != 0 {
		return syscall.EEXIST
	}
	if exists && dst.Dir != src.Dir {
		if src.Dir {
			return syscall.ENOTDIR
		}
		return syscall.EISDIR
	}
	if src.Dir {
		return f.renameDir(ctx, d, name, nd, newName, exists)
	}
	// Journaled first (a crash midway is finished by the next mount), and
	// before the replaced file's uploads are cancelled: one that lands
	// meanwhile stays for the renamed file to replace, so the name is
	// never missing from the bucket.
	mv, err := f.wb.BeginMove(d.key.get()+name, nd.key.get()+newName, false)
	if err != nil {
		return toErrno(err)
	}
	defer mv.Done()
	if exists { // the file being replaced uploads nothing any more
		for _, n := range f.replaced(nd, newName) {
			n.markUnlinked()
		}
		f.wb.Cancel(nd.key.get() + newName)
	}
	var n *fileNode
	ch := d.GetChild(name)
	if ch != nil {
		n, _ = ch.Operations().(*fileNode)
	}
	if n == nil {
		n = newFileNode(f, d.key.get()+name, src)
	}
	if err := f.moveFile(ctx, n, d.key.get(), name, nd.key.get(), newName); err != nil {
		return toErrno(err)
	}
	if ch != nil {
		f.inos.moved(ch) // its number was derived from its old key
	}
	return 0
}
