package fs

import "github.com/stratafs/strata/cache/meta"

// trackLocal records that n (key) holds local content and shows it in the
// tree until its upload lands. A node whose name is gone (unlinked, or
// renamed over) shows nothing: a process writing to its descriptor after
// the name went writes to a file that is in no directory, as on local
// disk. The check and the local entry are made under n.mu, which
// markUnlinked takes before an unlink or a rename clears the name's local
// entry: either that clears this one, or this one is never made.
func (f *FS) trackLocal(n *fileNode, key string, e meta.Entry) {
	n.mu.Lock()
	if n.unlinked {
		n.mu.Unlock()
		return
	}
	f.mu.Lock()
	f.files[key] = n
	sweep := len(f.files) > f.sweepAt
	f.mu.Unlock()
	dir, name := meta.Parent(key)
	f.meta.SetLocal(dir, meta.Entry{Name: name, Size: e.Size, MTime: e.MTime, Version: n.ident, Local: true})
	n.mu.Unlock()
	if sweep { // forget the nodes whose upload is complete (localUnder takes their locks)
		left := len(f.localUnder(""))
		f.mu.Lock()
		f.sweepAt = max(64, 2*left)
		f.mu.Unlock()
	}
}

// untrack forgets key's local state.
func (f *FS) untrack(key string, n *fileNode) {
	f.mu.Lock()
	if f.files[key] == n {
		delete(f.files, key)
	}
	f.mu.Unlock()
}

// fileIno is the inode number of file e, named name in d. A file written
// here keeps the number its node was given, whatever it has been renamed
// to since, as rename(2) keeps an inode, and after its upload lands, while
// its node still stands for the name: numbered from its new name or its
// new version, a lookup gave the kernel a second inode for the same file,
// and an unlink or a rename over the name reached only one of them. The
// node is the one tracked for the key while it has local content, and the
// directory's child of that name (what the kernel has for it) after the
// sweep in trackLocal forgot it: a rename's target is looked up again
// (the kernel revalidates it), so that lookup must find the node a
// process may hold open for writing. That child may also be a node made
// from the bucket's version after the kernel forgot the one that wrote
// it (it got the writer's number while the writer was still tracked).
func (f *FS) fileIno(d *dirNode, name string, e meta.Entry) uint64 {
	ino, _ := f.fileNodeOf(d, name, e)
	return ino
}

// fileNodeOf is fileIno, and also returns the node the kernel already has
// under that number, if fileIno found one: a lookup answers with that
// node's attributes (a file being written has grown past e's size), not
// with those of the node it makes from e, which go-fuse drops for it.
func (f *FS) fileNodeOf(d *dirNode, name string, e meta.Entry) (uint64, *fileNode) {
	key := meta.Join(d.key.get(), name, false)
	f.mu.Lock()
	n := f.files[key]
	f.mu.Unlock()
	if ino := n.inoIf(e); ino != 0 {
		return ino, n
	}
	ino := f.inoFor('f', key, e.Version)
	ch := d.GetChild(name)
	if ch == nil {
		return ino, nil
	}
	cn, _ := ch.Operations().(*fileNode)
	// The kernel's node of the name: no lock of it when it is numbered
	// from this version already (any node only read: the usual lookup).
	if ch.StableAttr().Ino == ino {
		return ino, cn
	}
	if cn != nil && cn != n {
		if cino := cn.inoIf(e); cino != 0 {
			return cino, cn
		}
		if cn.takesName(e) {
			// Made by a lookup after the kernel forgot the node that
			// wrote the file, while that one was tracked: it has that
			// one's number, which the kernel now knows it by.
			return ch.StableAttr().Ino, cn
		}
	}
	return ino, nil
}

// takesName reports whether n, the kernel's node of e's name, is e's
// file: its entry is that version (a lookup made it from e, or its own
// upload created e and it has taken it), or n, which wrote nothing, was
// made from the local entry of content whose upload has landed since (the
// kernel forgot the writer meanwhile). Such a node takes e
// now, as refresh would at its next open (the name's entry), so that its
// writes after the name goes stage the bytes it stood for; not while the
// kernel reads a backing file for it (refresh decides about a shadow).
func (n *fileNode) takesName(e meta.Entry) bool {
	if e.Local {
		return false
	}
	key := n.key.get()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.unlinked:
		return false
	case !n.entry.Local:
		return n.entry.Version == e.Version
	case n.peekWS().ownJob() != nil:
		// It wrote the file: is() says which version is its own; another
		// one (another client's rewrite) is a new node, as ever.
		return false
	case n.peekWS().session() != nil || n.ptOpen > 0 || n.fsys.wb == nil || n.fsys.wb.Pending(key):
		return false
	}
	n.entry, n.base = e, e.Version
	return true
}

// inoIf returns n's inode number if e is n's file, else 0 (also for a
// node the kernel was never given).
func (n *fileNode) inoIf(e meta.Entry) uint64 {
	if n == nil || !n.is(e) {
		return 0
	}
	return n.StableAttr().Ino
}

// is reports whether e (the key's entry) is the node's file: its local
// content, or the version its own upload created.
func (n *fileNode) is(e meta.Entry) bool {
	if e.Local {
		return n.ident == e.Version
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.peekWS().ownJob().Landed()
	return ok && v == e.Version
}
