package local

import (
	"container/list"
	"os"
	"sync"
	"syscall"
	"time"
)

// dirStamp identifies one state of a directory: any entry added, removed
// or renamed changes its mtime and ctime (and usually its size).
type dirStamp struct {
	ino          uint64
	size         int64
	mtime, ctime int64
}

func stampOf(fi os.FileInfo) dirStamp {
	s := dirStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
		s.ctime = time.Unix(st.Ctim.Unix()).UnixNano()
	}
	return s
}

// stableAfter is how old a directory's last change must be before its
// listing is cached. Timestamps have a coarse grain (a kernel tick, or
// worse on NFS): a change made in the same tick as the read that was
// cached would leave the stamp as it was. A directory changed that
// recently is re-read instead.
const stableAfter = 2 * time.Second

// dirCache keeps the sorted entries of recently listed large directories so
// that paging through a directory of a million names does not read it
// once per page. Entries are checked against the directory's stamp on
// every use.
type dirCache struct {
	max int

	mu  sync.Mutex // guards ll and m; held for map operations only, never I/O
	ll  *list.List // of *dirList, most recent first
	m   map[string]*list.Element
	now func() time.Time
}

type dirList struct {
	rel   string
	stamp dirStamp
	ents  []entry // shared, never modified after put
}

func newDirCache(max int) *dirCache {
	return &dirCache{max: max, ll: list.New(), m: map[string]*list.Element{}, now: time.Now}
}

// get returns the cached entries of rel if they were read at stamp.
func (c *dirCache) get(rel string, stamp dirStamp) []entry {
	if c.max == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[rel]
	if !ok {
		return nil
	}
	d := el.Value.(*dirList)
	if d.stamp != stamp {
		c.ll.Remove(el)
		delete(c.m, rel)
		return nil
	}
	c.ll.MoveToFront(el)
	return d.ents
}

// put caches ents as the listing of rel at stamp, unless the directory
// changed too recently for its stamp to be trusted.
func (c *dirCache) put(rel string, stamp dirStamp, ents []entry) {
	if c.max == 0 {
		return
	}
	newest := max(stamp.mtime, stamp.ctime)
	if c.now().UnixNano()-newest < int64(stableAfter) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[rel]; ok {
		c.ll.Remove(el)
	}
	c.m[rel] = c.ll.PushFront(&dirList{rel: rel, stamp: stamp, ents: ents})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*dirList).rel)
	}
}
