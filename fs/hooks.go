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

// fileIno is the inode number of file e at key. A file with local
// content (written here, its upload pending) keeps the number its node
// was given, whatever it has been renamed to since, as rename(2) keeps an
// inode: numbered from its new name, a lookup of that name gave the
// kernel a second inode for the same upload, and a rename over one of
// them cancelled the content the other was being read from.
func (f *FS) fileIno(key string, e meta.Entry) uint64 {
	if e.Local {
		f.mu.Lock()
		n := f.files[key]
		f.mu.Unlock()
		if n != nil && n.ident == e.Version {
			if ino := n.StableAttr().Ino; ino != 0 { // 0: a node the kernel was never given
				return ino
			}
		}
	}
	return inoOf('f', key, e.Version)
}
