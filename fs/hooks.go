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
