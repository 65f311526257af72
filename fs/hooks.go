package fs

import "github.com/stratafs/strata/cache/meta"

// trackLocal records that n (key) holds local content and shows it in the
// tree until its upload lands.
func (f *FS) trackLocal(n *fileNode, key string, e meta.Entry) {
	f.mu.Lock()
	f.files[key] = n
	sweep := len(f.files) > f.sweepAt
	f.mu.Unlock()
	if sweep { // forget the nodes whose upload is complete
		left := len(f.localUnder(""))
		f.mu.Lock()
		f.sweepAt = max(64, 2*left)
		f.mu.Unlock()
	}
	dir, name := meta.Parent(key)
	f.meta.SetLocal(dir, meta.Entry{Name: name, Size: e.Size, MTime: e.MTime, Version: n.ident, Local: true})
}

// untrack forgets key's local state.
func (f *FS) untrack(key string, n *fileNode) {
	f.mu.Lock()
	if f.files[key] == n {
		delete(f.files, key)
	}
	f.mu.Unlock()
}

// fileIno is the inode number of file e at key. A file written here
// keeps the number its node was given, whatever it has been renamed to
// since, as rename(2) keeps an inode, and after its upload lands, while
// its node still stands for the key: numbered from its new name or its
// new version, a lookup gave the kernel a second inode for the same file,
// and an unlink or a rename over the name reached only one of them.
func (f *FS) fileIno(key string, e meta.Entry) uint64 {
	f.mu.Lock()
	n := f.files[key]
	f.mu.Unlock()
	if n != nil && n.is(e) {
		if ino := n.StableAttr().Ino; ino != 0 { // 0: a node the kernel was never given
			return ino
		}
	}
	return inoOf('f', key, e.Version)
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
