package fs

import (
	"fmt"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

// trackLocal records that n (key) holds local content and shows it in the
// tree until its upload lands.
func (f *FS) trackLocal(n *fileNode, key string, e meta.Entry) {
	f.mu.Lock()
	f.files[key] = n
	f.mu.Unlock()
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

// Hooks are what the uploader tells the filesystem.
func (f *FS) Hooks() writeback.Hooks {
	return writeback.Hooks{Uploaded: f.uploaded, Pending: f.pending}
}

// uploaded: key is complete in the bucket. The node (if any) now reads
// the cached copy of that version, unless it was written again meanwhile.
func (f *FS) uploaded(key string, info backend.ObjectInfo, size, mtime int64) {
	dir, name := meta.Parent(key)
	e := meta.Entry{Name: name, Size: size, MTime: mtime, Version: info.Version}
	f.mu.Lock()
	n := f.files[key]
	f.mu.Unlock()
	stillLocal := false
	if n != nil {
		n.sessMu.Lock()
		n.mu.Lock()
		if n.sess == nil && !f.wb.Pending(key) {
			n.entry, n.base = e, info.Version
			if n.local != nil {
				n.local.Close()
				n.local = nil
			}
		} else {
			stillLocal = true
		}
		n.mu.Unlock()
		n.sessMu.Unlock()
		if !stillLocal {
			f.untrack(key, n)
		}
	}
	if !stillLocal {
		f.meta.ClearLocal(dir, name)
	}
	f.meta.Upsert(dir, e)
}

// pending: a journaled upload found at startup; show the file meanwhile.
func (f *FS) pending(key string, size, mtime int64) {
	dir, name := meta.Parent(key)
	f.meta.SetLocal(dir, meta.Entry{Name: name, Size: size, MTime: mtime, Version: fmt.Sprintf("local:%d", mtime), Local: true})
}
