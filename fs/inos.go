package fs

import (
	"strconv"
	"sync"
	"sync/atomic"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// movedInos remembers the inode numbers of nodes that were renamed. A
// number is derived from a key (and a file's version) when a node is
// made, and a node keeps it across renames, as rename(2) keeps an inode:
// so a new node at a renamed node's old key (a directory made again, an
// object of the same content put there) would get the same number, and
// the kernel would take two names for one inode (a directory's new files
// listed in the old one's place; `du`, `tar` and `find` seeing hard-linked
// directories). inoFor gives such a node another number.
type movedInos struct {
	// held is len(byIno), read without mu: lookups and forgets, per
	// request, take no lock while no renamed node is held (the usual
	// read-only mount).
	held  atomic.Int64
	mu    sync.Mutex
	byIno map[uint64]*gofs.Inode // the renamed node holding each number
}

// moved records that in, known to the kernel, no longer stands at the key
// its number was derived from.
func (m *movedInos) moved(in *gofs.Inode) {
	ino := in.StableAttr().Ino
	if ino == 0 {
		return // never handed to the kernel
	}
	m.mu.Lock()
	if m.byIno == nil {
		m.byIno = map[uint64]*gofs.Inode{}
	}
	m.byIno[ino] = in
	m.held.Store(int64(len(m.byIno)))
	m.mu.Unlock()
}

// forget drops in's number once the kernel has forgotten it (OnForget):
// a new node may have it again.
func (m *movedInos) forget(in *gofs.Inode) {
	if m.held.Load() == 0 {
		return
	}
	ino := in.StableAttr().Ino
	m.mu.Lock()
	if m.byIno[ino] == in {
		delete(m.byIno, ino)
		m.held.Store(int64(len(m.byIno)))
	}
	m.mu.Unlock()
}

// taken reports whether a renamed node the kernel holds has ino.
func (m *movedInos) taken(ino uint64) bool {
	if m.held.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byIno[ino] != nil
}

// inoFor is the inode number of a new node for key (and version): the
// one derived from them, unless a renamed node still holds it.
func (f *FS) inoFor(kind byte, key, version string) uint64 {
	ino := inoOf(kind, key, version)
	for salt := 1; f.inos.taken(ino); salt++ {
		ino = inoOf(kind, key, version+"\x00"+strconv.Itoa(salt))
	}
	return ino
}

var (
	_ gofs.NodeOnForgetter = (*fileNode)(nil)
	_ gofs.NodeOnForgetter = (*dirNode)(nil)
)

// OnForget: the kernel has forgotten the node (go-fuse calls it for no
// other reason here: the tree is never changed with RmChild or AddChild).
func (n *fileNode) OnForget() { n.fsys.inos.forget(n.EmbeddedInode()) }

// OnForget: as fileNode's.
func (d *dirNode) OnForget() { d.fsys.inos.forget(d.EmbeddedInode()) }

// subdirIno is the inode number of d's subdirectory name: the kernel's
// node of it if that is this directory (one renamed here keeps the number
// of its old key), else a new node's.
func (d *dirNode) subdirIno(name, key string) uint64 {
	if ch := d.GetChild(name); ch != nil {
		if dn, ok := ch.Operations().(*dirNode); ok && dn.key.get() == key {
			return ch.StableAttr().Ino
		}
	}
	return d.fsys.inoFor('d', key, "")
}
