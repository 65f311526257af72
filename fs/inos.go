package fs

import (
	"strconv"
	"sync"

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
	mu      sync.Mutex
	byIno   map[uint64]*gofs.Inode // the renamed node holding each number
	sweepAt int                    // size at which forgotten nodes are dropped
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
		m.byIno, m.sweepAt = map[uint64]*gofs.Inode{}, 1024
	}
	m.byIno[ino] = in
	var all []uint64
	if len(m.byIno) > m.sweepAt {
		all = make([]uint64, 0, len(m.byIno))
		for ino := range m.byIno {
			all = append(all, ino)
		}
	}
	m.mu.Unlock()
	if all != nil {
		// Forgotten() takes the inode's lock: not under m.mu.
		for _, ino := range all {
			m.forgetIfGone(ino)
		}
		m.mu.Lock()
		m.sweepAt = max(1024, 2*len(m.byIno))
		m.mu.Unlock()
	}
}

// taken reports whether a live renamed node holds ino.
func (m *movedInos) taken(ino uint64) bool {
	m.mu.Lock()
	in := m.byIno[ino]
	m.mu.Unlock()
	return in != nil && !m.forgetIfGone(ino)
}

// forgetIfGone drops ino if the kernel has forgotten its node, and says
// whether it did.
func (m *movedInos) forgetIfGone(ino uint64) bool {
	m.mu.Lock()
	in := m.byIno[ino]
	m.mu.Unlock()
	if in == nil {
		return true
	}
	if !in.Forgotten() {
		return false
	}
	m.mu.Lock()
	if m.byIno[ino] == in {
		delete(m.byIno, ino)
	}
	m.mu.Unlock()
	return true
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
