package fs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/meta"
)

// moveFile moves one file, inside a journaled rename (Rename's
// BeginMove). Content not yet in the bucket (a write session or a pending
// upload) simply changes the name it will go up as; content in the
// bucket is copied server-side (the destination appears whole,
// atomically) and the old name deleted, and its cached copy is carried
// over so the new name reads without a GET.
func (f *FS) moveFile(ctx context.Context, n *fileNode, oldDir, oldName, newDir, newName string) error {
	oldKey, newKey := oldDir+oldName, newDir+newName
	if moved, err := f.moveSynced(ctx, n, oldDir, oldName, newDir, newName); moved || err != nil {
		return err
	}
	local, unsent, err := f.moveLocal(n, oldKey, newKey)
	if err != nil {
		return err
	}
	// Uploads that landed under either name before the rename could move
	// or cancel them settle first: their namespace updates must not follow
	// ours, and the bucket's version of the old name is what is renamed.
	if err := f.waitLanded(ctx, oldKey, newKey); err != nil {
		return err
	}
	if local {
		// The old name may also hold an older version in the bucket,
		// unless the file was created here and nothing of it was sent
		// (a checkpoint's files renamed with their directory: a DELETE
		// each, one round trip after another, for nothing).
		if !unsent {
			if err := f.deleteObject(ctx, oldKey); err != nil {
				return err
			}
		}
		f.meta.ClearLocal(oldDir, oldName)
		f.meta.Remove(oldDir, oldName)
		return nil
	}
	e, err := n.refresh(ctx)
	if err != nil {
		return err
	}
	if e.Local { // not in the bucket, yet no upload pending: refuse, lose nothing
		f.log.Warn("fs: rename: the file's upload is neither pending nor in the bucket", "key", oldKey)
		return syscall.EBUSY
	}

	cp, ok := f.be.(backend.Copier)
	if !ok {
		return syscall.EXDEV // mv copies and unlinks by itself
	}
	info, err := f.copyObject(ctx, cp, oldKey, e.Version, newKey)
	if err != nil {
		return err
	}
	f.relinkCached(oldKey, e.Version, newKey, info)
	if err := f.deleteObject(ctx, oldKey); err != nil {
		return err
	}
	ne := meta.Entry{Name: newName, Size: info.Size, MTime: info.MTime.UnixNano(), Version: info.Version}
	n.mu.Lock()
	n.key.set(newKey)
	n.entry, n.base = ne, info.Version
	if w := n.peekWS(); w != nil {
		w.last, w.own = nil, nil
	}
	n.mu.Unlock()
	f.untrack(oldKey, n) // remembered there until a sweep: no longer its key
	f.meta.Remove(oldDir, oldName)
	// The file it replaced may have been written here: its local entry
	// would stand for the name over the bucket's.
	f.meta.ClearLocal(newDir, newName)
	f.meta.Upsert(newDir, ne)
	return nil
}

// renameDir moves a directory: every object under it is copied
// server-side and deleted, up to RenameDirLimit objects (EXDEV beyond, so
// mv falls back to copying file by file). It is not atomic: a crash
// midway leaves some files under each name, none lost.
func (f *FS) renameDir(ctx context.Context, d *dirNode, name string, nd *dirNode, newName string, destExists bool) syscall.Errno {
	oldPrefix, newPrefix := d.key.get()+name+"/", nd.key.get()+newName+"/"
	if strings.HasPrefix(newPrefix, oldPrefix) {
		return syscall.EINVAL
	}
	if errno := f.checkKey(newPrefix); errno != 0 {
		return errno
	}
	if destExists {
		empty, err := f.dirEmpty(ctx, newPrefix)
		if err != nil {
			return toErrno(err)
		}
		if !empty {
			return syscall.ENOTEMPTY
		}
	}
	cp, ok := f.be.(backend.Copier)
	if !ok {
		return syscall.EXDEV
	}
	// Journaled first: a crash midway is finished by the next mount.
	mv, err := f.wb.BeginMove(oldPrefix, newPrefix, true)
	if err != nil {
		return toErrno(err)
	}
	defer mv.Done()
	// The files with local content first, then the bucket's listing: an
	// upload that lands in between is in both (and moved once by each),
	// never in neither.
	locals := f.localUnder(oldPrefix)
	pending := f.nodelessPending(oldPrefix, locals) // resumed after a restart (renamepending.go)
	objs, complete, err := backend.ListAll(ctx, f.be, oldPrefix, max(f.opts.RenameDirLimit-len(locals)-len(pending), 1))
	if err != nil {
		return toErrno(err)
	}
	if !complete || len(objs)+len(locals)+len(pending) > f.opts.RenameDirLimit {
		f.log.Info("fs: directory too big to rename here; mv will copy it", "dir", oldPrefix, "limit", f.opts.RenameDirLimit)
		return syscall.EXDEV
	}
	// Every key under the new name must fit, or nothing moves.
	for _, o := range objs {
		if errno := f.checkKey(newPrefix + strings.TrimPrefix(o.Key, oldPrefix)); errno != 0 {
			return errno
		}
	}
	for _, n := range locals {
		if errno := f.checkKey(newPrefix + strings.TrimPrefix(n.key.get(), oldPrefix)); errno != 0 {
			return errno
		}
	}
	for _, k := range pending {
		if errno := f.checkKey(newPrefix + strings.TrimPrefix(k, oldPrefix)); errno != 0 {
			return errno
		}
	}
	moved, landed, err := f.movePending(ctx, pending, oldPrefix, newPrefix)
	if err != nil {
		return toErrno(err)
	}
	more, err := f.landedObjects(ctx, landed, objs)
	if err != nil {
		return toErrno(err)
	}
	objs = append(objs, more...)
	// A file with local content is moved by moveFile (or movePending)
	// alone, whatever version of it the listing saw.
	localKeys := make(map[string]bool, len(locals)+len(moved))
	for _, n := range locals {
		localKeys[n.key.get()] = true
	}
	for _, mv := range moved {
		localKeys[mv.oldKey] = true
	}
	objs = slices.DeleteFunc(objs, func(o backend.ObjectInfo) bool { return localKeys[o.Key] })
	// Copy everything first, then delete: a failure leaves both names.
	copied, err := f.copyAll(ctx, cp, objs, oldPrefix, newPrefix)
	if err != nil {
		return toErrno(err)
	}
	for _, n := range locals {
		oldKey := n.key.get()
		newKey := newPrefix + strings.TrimPrefix(oldKey, oldPrefix)
		od, on := meta.Parent(oldKey)
		nd, nn := meta.Parent(newKey)
		if err := f.moveFile(ctx, n, od, on, nd, nn); err != nil {
			return toErrno(err)
		}
	}
	if err := f.finishPending(ctx, moved); err != nil {
		return toErrno(err)
	}
	for _, o := range objs {
		if err := f.deleteObject(ctx, o.Key); err != nil {
			return toErrno(err)
		}
	}
	if backend.UnlistedMarker(objs, oldPrefix) {
		// A directory tree's (file://) old directory, which the listing
		// shows only while empty: its delete takes the emptied ones.
		_ = f.deleteObject(ctx, oldPrefix) // logged; the files moved
	}
	if len(objs) == 0 && len(locals) == 0 && len(moved) == 0 { // keep an empty directory visible
		if w, ok := f.be.(backend.Writer); ok {
			// The old name had no object either: without the marker the
			// new name is still listed from the cache until its TTL.
			if _, err := w.Put(ctx, newPrefix, strings.NewReader(""), 0, backend.PutOptions{}); err != nil {
				f.log.Warn("fs: rename: marking the empty directory", "dir", newPrefix, "err", err)
			}
		}
	}
	f.meta.Remove(d.key.get(), name)
	f.meta.Upsert(nd.key.get(), meta.Entry{Name: newName, Dir: true})
	f.meta.InvalidatePrefix(oldPrefix)
	f.meta.InvalidatePrefix(newPrefix)
	f.inos.dirsMoved(oldPrefix, newPrefix)
	if ch := d.GetChild(name); ch != nil {
		f.rekeyTree(ch, oldPrefix, newPrefix, copied)
	}
	return 0
}

// moveLocal gives n's local content (a write session, pending uploads)
// the new key. It reports false, moving nothing, when n's content is the
// bucket's: never written, or its upload complete or landed (Rekey); and
// unsent when the old key cannot hold an object of this file: created
// here and not committed yet, or none of its uploads started (Rekey).
func (f *FS) moveLocal(n *fileNode, oldKey, newKey string) (local, unsent bool, err error) {
	w := n.ws() // renamed: as if written (the lock orders it against writes)
	w.sessMu.Lock()
	defer w.sessMu.Unlock()
	n.mu.Lock()
	writing, isLocal := w.sess != nil, n.entry.Local
	created := n.base == backend.VersionAbsent // never committed: a commit clears base
	n.mu.Unlock()
	if !writing && !isLocal {
		return false, false, nil
	}
	// The manager holds the pending uploads and the session counts by
	// key: it moves them first, and refuses if its journal cannot.
	r, err := f.wb.Rekey(oldKey, newKey, "")
	if err != nil || (!writing && !r.Moved) {
		return false, false, err
	}
	n.mu.Lock()
	n.key.set(newKey)
	n.base, w.last = "", nil // rename replaces whatever the new name holds
	if !r.Moved {
		w.own = nil // what it uploaded went up under the old name
	}
	e := n.entry
	n.mu.Unlock()
	f.untrack(oldKey, n)
	f.trackLocal(n, newKey, e)
	return true, r.Unsent || created, nil
}

// copyAll copies objects from under oldPrefix to newPrefix, 8 at a time,
// carrying cached copies over. It returns the new objects by new key.
func (f *FS) copyAll(ctx context.Context, cp backend.Copier, objs []backend.ObjectInfo, oldPrefix, newPrefix string) (map[string]backend.ObjectInfo, error) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	copied := map[string]backend.ObjectInfo{}
	for _, o := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			dst := newPrefix + strings.TrimPrefix(o.Key, oldPrefix)
			info, err := cp.Copy(ctx, o.Key, o.Version, dst)
			if errors.Is(err, backend.ErrNotExist) {
				// Gone since the listing (deleted by another client, an
				// upload overtaken by a rename taken back down, or a
				// listing served stale): nothing to move, as the
				// journal's replay of a rename has it (finishMove).
				f.log.Debug("fs: rename: an object listed under the directory is gone; skipped", "key", o.Key)
				return
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("fs: rename copy %s: %w", o.Key, err)
				}
				mu.Unlock()
				return
			}
			mu.Lock()
			copied[dst] = info
			mu.Unlock()
			f.relinkCached(o.Key, o.Version, dst, info)
		}()
	}
	wg.Wait()
	return copied, first
}

// localUnder returns the nodes with local content under prefix: a write
// session, or an upload the writeback manager still holds. Nodes whose
// upload is complete are forgotten here.
func (f *FS) localUnder(prefix string) []*fileNode {
	f.mu.Lock()
	var cands []*fileNode
	var keys []string
	for k, n := range f.files {
		if strings.HasPrefix(k, prefix) {
			cands, keys = append(cands, n), append(keys, k)
		}
	}
	f.mu.Unlock()
	var out []*fileNode
	for i, n := range cands {
		// A node's key is its own to change (a rename): one tracked
		// under a key it no longer has is not under prefix for that.
		if key := n.key.get(); key == keys[i] && f.hasLocal(n, key) {
			out = append(out, n)
		} else {
			f.untrack(keys[i], n)
		}
	}
	return out
}

// hasLocal reports whether n (key) has local content: a write session, or
// an upload the writeback manager still holds.
func (f *FS) hasLocal(n *fileNode, key string) bool {
	n.mu.Lock()
	writing := n.peekWS().session() != nil
	n.mu.Unlock()
	return writing || f.wb.Pending(key)
}

// rekeyTree updates the keys of the loaded nodes under a renamed
// directory (go-fuse moves the inodes; the keys are ours), and the
// versions of files copied in the bucket.
func (f *FS) rekeyTree(in *gofs.Inode, oldPrefix, newPrefix string, copied map[string]backend.ObjectInfo) {
	switch n := in.Operations().(type) {
	case *dirNode:
		if k := n.key.get(); strings.HasPrefix(k, oldPrefix) {
			n.key.set(newPrefix + strings.TrimPrefix(k, oldPrefix))
			f.inos.dirRenamed(n.key.get(), in.StableAttr().Ino)
		}
	case *fileNode:
		n.mu.Lock()
		if k := n.key.get(); strings.HasPrefix(k, oldPrefix) {
			nk := newPrefix + strings.TrimPrefix(k, oldPrefix)
			n.key.set(nk)
			if w := n.peekWS(); w != nil {
				w.last, w.own = nil, nil // its uploads went up under the old name
			}
			if info, ok := copied[nk]; ok && !n.entry.Local {
				n.entry.Version, n.base = info.Version, info.Version
			}
		}
		n.mu.Unlock()
	}
	f.inos.moved(in) // its number was derived from its old key
	for _, ch := range in.Children() {
		f.rekeyTree(ch, oldPrefix, newPrefix, copied)
	}
}
