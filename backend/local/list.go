package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/stratafs/strata/backend"
)

// tmpPrefix names Put's temporary files; List never shows them.
const tmpPrefix = ".strata-tmp-"

// entry is one name in a directory, with links already resolved.
type entry struct {
	name string
	dir  bool // a directory, or a link to one inside the root
	link bool // a symbolic link (stat through the root, following it)
}

// sortKey is the entry's position in key order: a directory "d" lists as
// the prefix "d/".
func (e entry) sortKey() string {
	if e.dir {
		return e.name + "/"
	}
	return e.name
}

// fileID identifies a directory, to break link loops in recursive walks.
type fileID struct{ dev, ino uint64 }

// errPageFull stops a walk once the page has one entry more than needed.
var errPageFull = errors.New("page full")

// List returns one page of keys under prefix, emulating an S3 delimiter
// listing (see the package documentation).
func (b *Backend) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return backend.ListPage{}, err
	}
	limit := opt.Limit
	if limit <= 0 {
		limit = b.opt.ListLimit
	}
	root, err := b.openRoot("list")
	if err != nil {
		return backend.ListPage{}, err
	}
	defer root.Close()

	dirKey, namePrefix := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirKey, namePrefix = prefix[:i+1], prefix[i+1:]
		if validKey(dirKey[:i]) != nil {
			return backend.ListPage{}, nil // no file can have such a key
		}
	}
	l := &lister{ctx: ctx, b: b, root: root, token: opt.Token, limit: limit, recursive: opt.Recursive}
	if err := l.dir(dirKey, namePrefix, nil); err != nil && !errors.Is(err, errPageFull) {
		return backend.ListPage{}, err
	}
	var page backend.ListPage
	items := l.items
	if len(items) > limit {
		items = items[:limit]
		page.Next = items[limit-1].key
	}
	for _, it := range items {
		if it.prefix {
			page.Prefixes = append(page.Prefixes, it.key)
		} else {
			page.Objects = append(page.Objects, it.obj)
		}
	}
	return page, nil
}

// lister gathers one page: limit+1 items in key order after token.
type lister struct {
	ctx       context.Context
	b         *Backend
	root      *os.Root
	token     string
	limit     int
	recursive bool
	items     []item
}

type item struct {
	key    string
	prefix bool
	obj    backend.ObjectInfo
}

func (l *lister) add(it item) error {
	l.items = append(l.items, it)
	if len(l.items) > l.limit {
		return errPageFull
	}
	return nil
}

// dir lists the directory holding keys that start with dirKey ("" or
// ending in "/"), keeping names that start with namePrefix.
func (l *lister) dir(dirKey, namePrefix string, ancestors []fileID) error {
	rel := strings.TrimSuffix(dirKey, "/")
	if rel == "" {
		rel = "."
	}
	sub, id, ents, err := l.b.readDir(l.root, rel, l.limit)
	if err != nil {
		if errors.Is(err, backend.ErrNotExist) {
			return nil // a missing prefix is an empty listing
		}
		return err
	}
	defer sub.Close()
	if slices.Contains(ancestors, id) {
		return nil // a link back to a directory being walked
	}
	ancestors = append(ancestors[:len(ancestors):len(ancestors)], id)
	if len(ents) == 0 && l.recursive && dirKey != "" && namePrefix == "" && dirKey > l.token {
		// An empty directory is what an object store keeps as a "dir/"
		// marker: a recursive listing (what a directory rename copies)
		// must carry it, or the rename drops it.
		fi, err := sub.Stat(".")
		if err != nil {
			return mapErr("list", rel, err)
		}
		return l.add(item{key: dirKey, obj: backend.ObjectInfo{Key: dirKey, MTime: fi.ModTime(), Version: fingerprint(fi)}})
	}
	// Entries before the token are skipped without a stat.
	start := 0
	if rest, ok := strings.CutPrefix(l.token, dirKey); ok && rest != "" {
		start, _ = slices.BinarySearchFunc(ents, rest, func(e entry, t string) int {
			return strings.Compare(e.sortKey(), t)
		})
		// A directory sorting before the token may still hold later keys.
		if start > 0 && ents[start-1].dir && strings.HasPrefix(rest, ents[start-1].sortKey()) {
			start--
		}
	}
	for _, e := range ents[start:] {
		if err := l.ctx.Err(); err != nil {
			return err
		}
		if !strings.HasPrefix(e.name, namePrefix) {
			continue
		}
		key := dirKey + e.name
		if e.dir {
			p := key + "/"
			switch {
			case !l.recursive:
				if p > l.token {
					err = l.add(item{key: p, prefix: true})
				}
			case l.token >= p && !strings.HasPrefix(l.token, p):
				// every key below p sorts before the token
			default:
				err = l.dir(p, "", ancestors)
			}
		} else if key > l.token {
			var info backend.ObjectInfo
			info, err = l.b.statEntry(l.root, sub, rel, e, key)
			if errors.Is(err, backend.ErrNotExist) {
				err = nil // removed or replaced since the directory was read
				continue
			}
			if err == nil {
				err = l.add(item{key: key, obj: info})
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readDir opens rel (following links inside the root) and returns its
// entries sorted by sortKey, from the cache when the directory is
// unchanged. The caller closes sub.
func (b *Backend) readDir(root *os.Root, rel string, limit int) (sub *os.Root, id fileID, ents []entry, err error) {
	err = retryStale(func() error { sub, err = root.OpenRoot(rel); return err })
	if err != nil {
		// OpenRoot's error for a non-directory matches no errno: look.
		if fi, serr := root.Stat(rel); serr == nil && !fi.IsDir() {
			return nil, id, nil, fmt.Errorf("local: list %q: not a directory: %w", rel, backend.ErrNotExist)
		}
		return nil, id, nil, mapErr("list", rel, err)
	}
	fi, err := sub.Stat(".")
	if err != nil {
		sub.Close()
		return nil, id, nil, mapErr("list", rel, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil {
		id = fileID{dev: uint64(st.Dev), ino: st.Ino}
	}
	stamp := stampOf(fi)
	if ents = b.dirs.get(rel, stamp); ents != nil {
		return sub, id, ents, nil
	}
	d, err := sub.Open(".")
	if err != nil {
		sub.Close()
		return nil, id, nil, mapErr("list", rel, err)
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		sub.Close()
		return nil, id, nil, mapErr("list", rel, err)
	}
	ents = make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		switch t := de.Type(); {
		case t.IsDir():
			ents = append(ents, entry{name: name, dir: true})
		case t.IsRegular():
			ents = append(ents, entry{name: name})
		case t&fs.ModeSymlink != 0:
			// Follow through the root: links out of it are refused.
			target, err := root.Stat(path.Join(rel, name))
			if err == nil && (target.IsDir() || target.Mode().IsRegular()) {
				ents = append(ents, entry{name: name, dir: target.IsDir(), link: true})
			}
		}
	}
	slices.SortFunc(ents, func(a, b entry) int { return strings.Compare(a.sortKey(), b.sortKey()) })
	if len(ents) > limit {
		b.dirs.put(rel, stamp, ents)
	}
	return sub, id, ents, nil
}

// statEntry stats one listed file: lstat in its directory, or stat
// through the root for a link.
func (b *Backend) statEntry(root, sub *os.Root, rel string, e entry, key string) (backend.ObjectInfo, error) {
	var fi os.FileInfo
	var err error
	if e.link {
		fi, err = root.Stat(path.Join(rel, e.name))
	} else {
		fi, err = sub.Lstat(e.name)
	}
	if err != nil {
		return backend.ObjectInfo{}, mapErr("list", key, err)
	}
	if !fi.Mode().IsRegular() {
		return backend.ObjectInfo{}, fmt.Errorf("local: list %q: no longer a regular file: %w", key, backend.ErrNotExist)
	}
	return objectInfo(key, fi), nil
}
