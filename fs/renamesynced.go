package fs

import (
	"context"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

// A file written by passthrough keeps its write session open across an
// fsync: the kernel goes on writing the staging file, and the fsync
// uploads a copy of it (syncLive). Renamed while still open (write,
// fsync, rename, then close: an atomic save that renames before it
// closes), such a file is in the bucket as it stands, so it is renamed as
// an uploaded file is: a server-side copy, then the old name deleted. Its
// session moves along, based on the copy, so that a close with nothing
// new publishes nothing more, and a writer killed after the rename leaves
// the copy, as it leaves any file's previous object. Renamed as unsent
// content instead, the old name's object went at once and the new name
// reached the bucket only with the last close (every byte sent twice), or
// never: a killed writer's file is kept aside, not uploaded.

// syncedContent reports n's passthrough write session and the version of
// its key that holds what the session's file holds, when the file is
// still, unchanged, what its latest fsync uploaded (or a rename copied).
func (n *fileNode) syncedContent() (lw *liveWrite, j *writeback.Job, version string, ok bool) {
	n.mu.Lock()
	lw = n.peekWS().liveSession()
	n.mu.Unlock()
	if lw == nil {
		return nil, nil, "", false
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if _, same := n.sameAsSyncedLocked(lw, true); !same {
		return nil, nil, "", false
	}
	if lw.copiedKey != "" {
		return lw, lw.syncedJob, lw.copiedVersion, true
	}
	version, _ = lw.syncedJob.Landed()
	return lw, lw.syncedJob, version, version != ""
}

// moveSynced renames n as an uploaded file (above) if it is one written
// by passthrough and unchanged since its fsync's upload; it reports false,
// having done nothing, otherwise. If the file changes or is committed
// while its copy is made, the rename goes on as one of unsent content
// (moveLocal): the close's upload then replaces the copy.
func (f *FS) moveSynced(ctx context.Context, n *fileNode, oldDir, oldName, newDir, newName string) (bool, error) {
	oldKey, newKey := oldDir+oldName, newDir+newName
	lw, j, version, ok := n.syncedContent()
	if !ok {
		return false, nil
	}
	cp, ok := f.be.(backend.Copier)
	if !ok {
		return false, nil // moved as unsent content: the close uploads it
	}
	if err := f.waitLanded(ctx, oldKey, newKey); err != nil { // as moveFile
		return true, err
	}
	info, err := f.copyObject(ctx, cp, oldKey, version, newKey)
	if err != nil {
		return true, err
	}
	moved, err := f.rebaseSynced(n, lw, j, version, oldKey, newKey, info)
	if !moved || err != nil {
		return moved, err
	}
	f.relinkCached(oldKey, version, newKey, info)
	if err := f.deleteObject(ctx, oldKey); err != nil {
		return true, err
	}
	f.meta.ClearLocal(oldDir, oldName)
	f.meta.Remove(oldDir, oldName)
	f.meta.Upsert(newDir, meta.Entry{Name: newName, Size: info.Size, MTime: info.MTime.UnixNano(), Version: info.Version})
	return true, nil
}

// rebaseSynced moves n's session to newKey, based on info (the copy of
// version): it reports false, moving nothing, if the session is no longer
// the one copied (a close committed it, another fsync uploaded it again,
// its name went, or a write failed meanwhile).
func (f *FS) rebaseSynced(n *fileNode, lw *liveWrite, j *writeback.Job, version, oldKey, newKey string, info backend.ObjectInfo) (bool, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	w := n.ws()
	w.sessMu.Lock()
	defer w.sessMu.Unlock()
	n.mu.Lock()
	st := w.sess
	still := w.live == lw && st != nil && lw.job == nil && lw.syncedJob == j && lw.failure() == nil &&
		!n.unlinked && n.key.get() == oldKey && (lw.copiedKey == "" || lw.copiedVersion == version)
	n.mu.Unlock()
	if !still {
		return false, nil
	}
	// The manager counts the session by key (and moves any upload still
	// pending: none, the fsync's has landed and stays with the old name).
	if _, err := f.wb.Rekey(oldKey, newKey, ""); err != nil {
		return true, err
	}
	_, name := meta.Parent(newKey)
	ne := meta.Entry{Name: name, Size: info.Size, MTime: info.MTime.UnixNano(), Version: info.Version}
	st.StartFrom(ne) // a write failing from here leaves the copy
	n.mu.Lock()
	n.key.set(newKey)
	n.entry.Version, n.base = info.Version, info.Version // the next commit replaces the copy, no other object
	w.last, w.own = nil, nil                             // they went up under the old name
	e := n.entry
	n.mu.Unlock()
	lw.copiedKey, lw.copiedVersion = newKey, info.Version
	f.untrack(oldKey, n)
	f.trackLocal(n, newKey, e)
	return true, nil
}

// waitLanded lets uploads that landed under keys before a rename could
// move or cancel them settle first: their namespace updates must not
// follow the rename's, and the bucket's version is what is renamed.
func (f *FS) waitLanded(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if err := f.wb.WaitLanded(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// copyObject copies version of oldKey to newKey server-side. An upload of
// the file newKey held, stopped by the rename, may still be landing under
// newKey: the copy goes after it.
func (f *FS) copyObject(ctx context.Context, cp backend.Copier, oldKey, version, newKey string) (backend.ObjectInfo, error) {
	if err := f.wb.WaitInFlight(ctx, newKey); err != nil {
		return backend.ObjectInfo{}, err
	}
	info, err := cp.Copy(ctx, oldKey, version, newKey)
	if err != nil {
		f.log.Warn("fs: rename copy failed", "from", oldKey, "to", newKey, "err", err)
		return backend.ObjectInfo{}, err
	}
	return info, nil
}

// relinkCached moves the cached copy of version of oldKey to newKey's copy
// (info), by hard link, so a renamed file stays warm. A copy not whole is
// left to eviction.
func (f *FS) relinkCached(oldKey, version, newKey string, info backend.ObjectInfo) {
	from := cache.ObjectKey{Source: f.source, Key: oldKey, Version: version}
	to := cache.ObjectKey{Source: f.source, Key: newKey, Version: info.Version, Size: info.Size, MTime: info.MTime.UnixNano()}
	if f.store.Link(from, to) == nil {
		f.store.Forget(from)
	}
}
