package fs

import (
	"strconv"
	"strings"
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
//
// A renamed directory also keeps its number once the kernel forgot its
// node (memory pressure, drop_caches), for as long as the name stands:
// numbered from its new name by the next lookup, it showed stat(2) one
// inode and the open that followed another (Python's shutil.rmtree takes
// that for a symlink swapped in and refuses). Files need no such record:
// one written here is numbered from its node while the mount tracks it,
// and from its name and version once its upload landed, as any file read
// from the bucket.
type movedInos struct {
	// held is len(byIno)+len(dirs), read without mu: lookups and
	// forgets, per request, take no lock while nothing was renamed (the
	// usual read-only mount).
	held    atomic.Int64
	mu      sync.Mutex
	byIno   map[uint64]*gofs.Inode // the renamed node holding each number
	dirs    map[string]uint64      // a renamed directory's key: its number
	dirKeys map[uint64]string      // dirs inverted: the numbers taken
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
	m.countLocked()
	m.mu.Unlock()
}

// dirRenamed records that the directory at key (renamed there) has ino.
func (m *movedInos) dirRenamed(key string, ino uint64) {
	if ino == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs == nil {
		m.dirs, m.dirKeys = map[string]uint64{}, map[uint64]string{}
	}
	m.dropDirLocked(key)
	m.dirs[key], m.dirKeys[ino] = ino, key
	m.countLocked()
}

// dirsMoved re-keys the records under oldPrefix (the directory renamed
// included: its descendants the kernel forgot keep their numbers too),
// after dropping those under newPrefix (an empty directory renamed over).
func (m *movedInos) dirsMoved(oldPrefix, newPrefix string) {
	if m.held.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirsGoneLocked(newPrefix)
	moved := map[string]uint64{}
	for key, ino := range m.dirs {
		if strings.HasPrefix(key, oldPrefix) {
			moved[newPrefix+strings.TrimPrefix(key, oldPrefix)] = ino
			m.dropDirLocked(key)
		}
	}
	for key, ino := range moved {
		m.dirs[key], m.dirKeys[ino] = ino, key
	}
	m.countLocked()
}

// dirGone drops the record of the directory at key (removed): a directory
// made there later is a new one.
func (m *movedInos) dirGone(key string) {
	if m.held.Load() == 0 {
		return
	}
	m.mu.Lock()
	m.dirsGoneLocked(key)
	m.countLocked()
	m.mu.Unlock()
}

func (m *movedInos) dirsGoneLocked(prefix string) {
	for key := range m.dirs {
		if strings.HasPrefix(key, prefix) {
			m.dropDirLocked(key)
		}
	}
}

func (m *movedInos) dropDirLocked(key string) {
	if ino, ok := m.dirs[key]; ok {
		delete(m.dirs, key)
		delete(m.dirKeys, ino)
	}
}

func (m *movedInos) countLocked() { m.held.Store(int64(len(m.byIno) + len(m.dirs))) }

// renamedDir returns the number of the directory renamed to key, if one
// was and still stands there.
func (m *movedInos) renamedDir(key string) (uint64, bool) {
	if m.held.Load() == 0 {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.dirs[key]
	return ino, ok
}

// forget drops in's number once the kernel has forgotten it (OnForget):
// a new node may have it again, unless a renamed directory's record
// keeps it.
func (m *movedInos) forget(in *gofs.Inode) {
	if m.held.Load() == 0 {
		return
	}
	ino := in.StableAttr().Ino
	m.mu.Lock()
	if m.byIno[ino] == in {
		delete(m.byIno, ino)
		m.countLocked()
	}
	m.mu.Unlock()
}

// taken reports whether a renamed node the kernel holds, or a renamed
// directory, has ino.
func (m *movedInos) taken(ino uint64) bool {
	if m.held.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, dir := m.dirKeys[ino]
	return m.byIno[ino] != nil || dir
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
// of its old key), else the renamed directory's number if one stands
// there (its node forgotten), else a new node's.
func (d *dirNode) subdirIno(name, key string) uint64 {
	if ch := d.GetChild(name); ch != nil {
		if dn, ok := ch.Operations().(*dirNode); ok && dn.key.get() == key {
			return ch.StableAttr().Ino
		}
	}
	if ino, ok := d.fsys.inos.renamedDir(key); ok {
		return ino
	}
	return d.fsys.inoFor('d', key, "")
}
