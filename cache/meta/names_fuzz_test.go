package meta

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// Listing pagination and shadowing: whatever the keys and wherever the
// backend cuts its pages, the merger emits each valid name once, a name
// that is both a key and a prefix as a directory (reporting the hidden
// file), and every invalid key reported and skipped.

// delimiterListing is what a backend returns for dir over keys: objects
// directly under dir (dir itself included, as a placeholder) and the
// common prefixes one level down, each sorted.
func delimiterListing(dir string, keys []string) (objs, prefixes []string) {
	seenP := map[string]bool{}
	seenO := map[string]bool{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, dir)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if p := dir + rest[:i+1]; !seenP[p] {
				seenP[p] = true
				prefixes = append(prefixes, p)
			}
		} else if !seenO[k] {
			seenO[k] = true
			objs = append(objs, k)
		}
	}
	sort.Strings(objs)
	sort.Strings(prefixes)
	return objs, prefixes
}

// paginate cuts the merged, ordered stream into pages of 0 to 4 entries
// (S3 may return an empty page before the last).
func paginate(objs, prefixes []string, seed uint64) []backend.ListPage {
	r := rand.New(rand.NewPCG(seed, 3))
	var pages []backend.ListPage
	cur := backend.ListPage{}
	room := r.IntN(5)
	for len(objs) > 0 || len(prefixes) > 0 {
		for room == 0 {
			pages = append(pages, cur)
			cur, room = backend.ListPage{}, r.IntN(5)
		}
		if len(prefixes) == 0 || (len(objs) > 0 && objs[0] < prefixes[0]) {
			cur.Objects = append(cur.Objects, backend.ObjectInfo{Key: objs[0], Size: int64(len(objs[0])), Version: "v-" + objs[0], MTime: time.Unix(1, 0)})
			objs = objs[1:]
		} else {
			cur.Prefixes = append(cur.Prefixes, prefixes[0])
			prefixes = prefixes[1:]
		}
		room--
	}
	return append(pages, cur)
}

// expectedNames applies the namespace rules directly: "name" or "name/".
func expectedNames(dir string, objs, prefixes []string) (names []string, shadowed, skipped []string) {
	dirs := map[string]bool{}
	for _, p := range prefixes {
		if name, _, _, ok, _ := ChildName(dir, p); ok {
			dirs[name] = true
			names = append(names, name+"/")
		} else {
			skipped = append(skipped, p)
		}
	}
	for _, o := range objs {
		name, _, self, ok, _ := ChildName(dir, o)
		switch {
		case self:
		case !ok:
			skipped = append(skipped, o)
		case dirs[name]:
			shadowed = append(shadowed, o)
		default:
			names = append(names, name)
		}
	}
	sort.Strings(names)
	sort.Strings(shadowed)
	sort.Strings(skipped)
	return names, shadowed, skipped
}

func mergePages(dir string, pages []backend.ListPage) (names []string, entries map[string]Entry, shadowed, skipped []string) {
	entries = map[string]Entry{}
	m := newMerger(dir, func(e Entry) {
		n := e.Name
		if e.Dir {
			n += "/"
		}
		names = append(names, n)
		entries[n] = e
	}, func(key, reason string) { skipped = append(skipped, key) }, func(key string) { shadowed = append(shadowed, key) })
	for _, p := range pages {
		m.page(p)
	}
	m.end()
	sort.Strings(names)
	sort.Strings(shadowed)
	sort.Strings(skipped)
	return names, entries, shadowed, skipped
}

func checkMerge(t *testing.T, dir string, keys []string, seed uint64) {
	t.Helper()
	objs, prefixes := delimiterListing(dir, keys)
	wantNames, wantShadow, wantSkip := expectedNames(dir, objs, prefixes)
	names, entries, shadowed, skipped := mergePages(dir, paginate(objs, prefixes, seed))
	if !slices.Equal(names, wantNames) {
		t.Fatalf("dir %q keys %q seed %d:\n got %q\nwant %q", dir, keys, seed, names, wantNames)
	}
	if !slices.Equal(shadowed, wantShadow) || !slices.Equal(skipped, wantSkip) {
		t.Fatalf("dir %q keys %q: shadowed %q (want %q), skipped %q (want %q)", dir, keys, shadowed, wantShadow, skipped, wantSkip)
	}
	for n, e := range entries {
		if !e.Dir && (e.Version != "v-"+dir+n || e.Size != int64(len(dir+n))) {
			t.Fatalf("entry %q carries another key's metadata: %+v", n, e)
		}
	}
}

func TestMergerPagination(t *testing.T) {
	tests := []struct {
		dir  string
		keys []string
	}{
		{"", []string{"x", "x-1", "x.2", "x/y", "x0"}},
		{"", []string{"a", "a!", "a/", "a/b", "a\x00", "a b"}},
		{"d/", []string{"d/", "d/f", "d//g", "d/./h", "d/../i", "d/k", "d/k/l", "e"}},
		{"", []string{strings.Repeat("n", 256), strings.Repeat("n", 255), "n/" + strings.Repeat("m", 300)}},
		{"", []string{"k", "k/", "k//", "k/c"}},
		{"p/", []string{"p/a", "p/a/b", "p/a-", "p/a-/c", "p/a.", "q/a"}},
	}
	for _, tc := range tests {
		for seed := range uint64(40) {
			checkMerge(t, tc.dir, tc.keys, seed)
		}
	}
}

// FuzzMerger: keys are separated by '\n' in blob; dirSel picks the
// directory listed (the root, or the first key's first segment).
func FuzzMerger(f *testing.F) {
	f.Add("x\nx-1\nx.2\nx/y\nx0", uint8(0), uint64(1))
	f.Add("d/\nd/f\nd//g\nd/..\nd/k\nd/k/l", uint8(1), uint64(7))
	f.Add("a\na!\na/b\na\x00\n..\n.\n/abs", uint8(0), uint64(3))
	f.Fuzz(func(t *testing.T, blob string, dirSel uint8, seed uint64) {
		keys := strings.Split(blob, "\n")
		if len(keys) > 200 {
			keys = keys[:200]
		}
		dir := ""
		if dirSel%2 == 1 {
			if i := strings.IndexByte(keys[0], '/'); i >= 0 {
				dir = keys[0][:i+1]
			}
		}
		checkMerge(t, dir, keys, seed)
		if name, isDir, _, ok, _ := ChildName(dir, keys[0]); ok && Join(dir, name, isDir) != keys[0] {
			t.Fatalf("Join(%q, %q) != %q", dir, name, keys[0])
		}
	})
}

// cancelAware fails every call made with a cancelled context, as real
// backends do.
type cancelAware struct{ *fakeBackend }

func (b cancelAware) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return backend.ObjectInfo{}, err
	}
	return b.fakeBackend.Stat(ctx, key)
}

func (b cancelAware) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return backend.ListPage{}, err
	}
	return b.fakeBackend.List(ctx, prefix, opt)
}

// TestLookupNotFailedByInterrupt: a point lookup whose caller's context
// is cancelled (the kernel's INTERRUPT when the calling thread gets any
// signal) still answers; it used to fail, and open() returned EINTR
// (posixtest AppendWrite under the Go runtime's preemption signals).
func TestLookupNotFailedByInterrupt(t *testing.T) {
	be := cancelAware{newFake(10, "d/f", "d/sub/x")}
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, dir := range map[string]bool{"f": false, "sub": true} {
		e, err := c.Lookup(ctx, "d/", name)
		if err != nil || e.Dir != dir {
			t.Errorf("lookup %s with an interrupted caller: %+v, %v", name, e, err)
		}
	}
	if _, err := c.Lookup(ctx, "d/", "missing"); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("lookup of a missing name with an interrupted caller: %v", err)
	}
}
