package meta

import (
	"strings"

	"github.com/stratafs/strata/backend"
)

// MaxNameLen is the longest name POSIX filesystems (and the kernel's FUSE
// client) accept for one path component.
const MaxNameLen = 255

// Why a key does not become a name.
const (
	reasonEmpty    = "empty path segment (a//b or a leading slash)"
	reasonDot      = "segment is . or .."
	reasonTooLong  = "segment longer than 255 bytes"
	reasonNUL      = "segment contains a NUL byte"
	reasonNotChild = "not directly under the directory"
)

// ChildName maps a listed key (an object key, or a common prefix ending in
// "/") to its name in directory dir (a prefix ending in "/", or ""). ok is
// false with a reason when the key cannot be a POSIX name; self is true for
// the directory's own placeholder object (key == dir), which is not a
// child at all.
func ChildName(dir, key string) (name string, isDir, self, ok bool, reason string) {
	if !strings.HasPrefix(key, dir) {
		return "", false, false, false, reasonNotChild
	}
	rest := key[len(dir):]
	if rest == "" {
		return "", false, true, false, ""
	}
	if strings.HasSuffix(rest, "/") {
		isDir = true
		rest = rest[:len(rest)-1]
	}
	switch {
	case rest == "":
		return "", isDir, false, false, reasonEmpty
	case strings.IndexByte(rest, '/') >= 0:
		if isDir || strings.HasPrefix(rest, "/") {
			return "", isDir, false, false, reasonEmpty
		}
		return "", isDir, false, false, reasonNotChild
	case rest == "." || rest == "..":
		return "", isDir, false, false, reasonDot
	case len(rest) > MaxNameLen:
		return "", isDir, false, false, reasonTooLong
	case strings.IndexByte(rest, 0) >= 0:
		return "", isDir, false, false, reasonNUL
	}
	return rest, isDir, false, true, ""
}

// merger turns backend pages (each sorted, pages in order) into a stream
// of unique entries applying the namespace rules: invalid names are
// reported and skipped, and a name that is both an object and a prefix is
// a directory. Because the prefix "x/" can arrive pages after the object
// "x" (keys such as "x-1" sort between them), a file is held back until
// the listing has moved past "x/" or ended.
type merger struct {
	dir     string
	emit    func(Entry)
	skip    func(key, reason string)
	shadow  func(key string)
	pending []Entry // files that a later prefix may still shadow
	seen    map[string]bool
}

func newMerger(dir string, emit func(Entry), skip func(key, reason string), shadow func(key string)) *merger {
	return &merger{dir: dir, emit: emit, skip: skip, shadow: shadow, seen: map[string]bool{}}
}

// page feeds one backend page.
func (m *merger) page(p backend.ListPage) {
	objs, dirs := p.Objects, p.Prefixes
	for len(objs) > 0 || len(dirs) > 0 {
		if len(dirs) == 0 || (len(objs) > 0 && objs[0].Key < dirs[0]) {
			m.object(objs[0])
			objs = objs[1:]
		} else {
			m.prefix(dirs[0])
			dirs = dirs[1:]
		}
	}
}

func (m *merger) object(o backend.ObjectInfo) {
	name, _, self, ok, reason := ChildName(m.dir, o.Key)
	if self {
		return
	}
	if !ok {
		m.skip(o.Key, reason)
		return
	}
	m.release(name)
	if m.seen[name] {
		return
	}
	m.seen[name] = true
	m.pending = append(m.pending, Entry{Name: name, Size: o.Size, MTime: o.MTime.UnixNano(), Version: o.Version})
}

func (m *merger) prefix(p string) {
	name, _, _, ok, reason := ChildName(m.dir, p)
	if !ok {
		m.skip(p, reason)
		return
	}
	for i, e := range m.pending {
		if e.Name == name { // the directory wins
			m.shadow(m.dir + name)
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			m.seen[name] = false
			break
		}
	}
	m.release(name + "/")
	if m.seen[name] {
		return
	}
	m.seen[name] = true
	m.emit(Entry{Name: name, Dir: true})
}

// release emits the held-back files that no prefix at or after cur can
// shadow any more.
func (m *merger) release(cur string) {
	kept := m.pending[:0]
	for _, e := range m.pending {
		if e.Name+"/" < cur {
			m.emit(e)
		} else {
			kept = append(kept, e)
		}
	}
	m.pending = kept
}

// end flushes everything held back.
func (m *merger) end() {
	for _, e := range m.pending {
		m.emit(e)
	}
	m.pending = nil
}
