package meta

import (
	"strings"

	"github.com/stratafs/strata/backend"
)

// flatBuilder turns the keys of one flat (undelimited) listing of a
// subtree into the complete listing of every directory inside it, with
// the namespace rules of a delimited listing: each directory's direct
// objects and child prefixes are gathered into one synthetic page and fed
// through the same merger.
//
// Keys arrive in byte order, so the keys under a directory are contiguous:
// the directories still open are exactly the ancestors of the last key (a
// stack), and a directory is complete ("sealed") as soon as a key arrives
// that is not under it. Only the open directories are held in memory.
// Within a directory, raw order is not name order ("a-b/x" sorts before
// "a/x", though the name "a" sorts before "a-b"); the merger sorts that
// out, as it does for delimited pages.
type flatBuilder struct {
	root    string
	stack   []*flatDir
	held    int                          // objects and prefixes held by open directories
	sealed  int                          // subdirectories of root sealed so far
	install func(dir string, es []Entry) // called for each sealed directory
	skip    func(key, reason string)
	shadow  func(key string)
}

// flatDir is one open directory: what a delimited listing of it returns.
type flatDir struct {
	dir      string
	objs     []backend.ObjectInfo
	prefixes []string
	// unreachable: its name, or an ancestor's, is not a valid POSIX name,
	// so no lookup can get there; it is not installed.
	unreachable bool
}

func newFlatBuilder(root string, install func(string, []Entry), skip func(string, string), shadow func(string)) *flatBuilder {
	b := &flatBuilder{root: root, install: install, skip: skip, shadow: shadow}
	b.stack = []*flatDir{{dir: root}}
	return b
}

// add takes the next key of the listing (keys in byte order).
func (b *flatBuilder) add(o backend.ObjectInfo) {
	k := o.Key
	if !strings.HasPrefix(k, b.root) {
		return // not ours (a backend never sends one)
	}
	for len(b.stack) > 1 && !strings.HasPrefix(k, b.top().dir) {
		b.seal()
	}
	top := b.top()
	for {
		i := strings.IndexByte(k[len(top.dir):], '/')
		if i < 0 {
			break
		}
		d := k[:len(top.dir)+i+1]
		top.prefixes = append(top.prefixes, d)
		b.held++
		_, _, _, ok, _ := ChildName(top.dir, d)
		nd := &flatDir{dir: d, unreachable: top.unreachable || !ok}
		b.stack = append(b.stack, nd)
		top = nd
	}
	top.objs = append(top.objs, o)
	b.held++
}

func (b *flatBuilder) top() *flatDir { return b.stack[len(b.stack)-1] }

// seal completes the innermost open directory and installs its listing.
func (b *flatBuilder) seal() {
	d := b.top()
	b.stack = b.stack[:len(b.stack)-1]
	b.held -= len(d.objs) + len(d.prefixes)
	if len(b.stack) == 1 {
		b.sealed++
	}
	if d.unreachable {
		return
	}
	var es []Entry
	m := newMerger(d.dir, func(e Entry) { es = append(es, e) }, b.skip, b.shadow)
	m.page(backend.ListPage{Objects: d.objs, Prefixes: d.prefixes})
	m.end()
	b.install(d.dir, es)
}

// finish seals every directory still open: the listing reached its end.
func (b *flatBuilder) finish() {
	for len(b.stack) > 0 {
		b.seal()
	}
}
