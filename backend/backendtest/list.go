package backendtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

// treeKeys exercise byte order around "/": "d-e" (0x2d) < "d.x" (0x2e) <
// "d/" (0x2f) < "d0" (0x30), and the same after a two-byte rune.
var treeKeys = []string{
	"a", "b/1", "b/2", "b/c/3", "b/c/d/4", "c d/e", "d-e", "d.x", "d/f", "d0", "z", "é/x", "é0",
}

// expectLevel computes what a delimiter listing of prefix must return.
func expectLevel(keys []string, prefix string) (objs, prefixes []string) {
	seen := map[string]bool{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if p := prefix + rest[:i+1]; !seen[p] {
				seen[p] = true
				prefixes = append(prefixes, p)
			}
			continue
		}
		objs = append(objs, k)
	}
	return sorted(objs), sorted(prefixes)
}

// expectRecursive is every key under prefix, sorted.
func expectRecursive(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return sorted(out)
}

func checkLevel(t *testing.T, b backend.Backend, keys []string, prefix string, limit int) listing {
	t.Helper()
	got := listAll(t, b, prefix, backend.ListOptions{Limit: limit})
	wantObjs, wantPrefixes := expectLevel(keys, prefix)
	if !slices.Equal(got.keys(), wantObjs) {
		t.Errorf("List(%q, Limit %d) objects = %q, want %q", prefix, limit, got.keys(), wantObjs)
	}
	if !slices.Equal(got.prefixes, wantPrefixes) {
		t.Errorf("List(%q, Limit %d) prefixes = %q, want %q", prefix, limit, got.prefixes, wantPrefixes)
	}
	return got
}

func checkRecursive(t *testing.T, b backend.Backend, keys []string, prefix string, limit int) listing {
	t.Helper()
	got := listAll(t, b, prefix, backend.ListOptions{Recursive: true, Limit: limit})
	if want := expectRecursive(keys, prefix); !slices.Equal(got.keys(), want) {
		t.Errorf("List(%q, Recursive, Limit %d) = %q, want %q", prefix, limit, got.keys(), want)
	}
	return got
}

func testList(t *testing.T, h Harness) {
	t.Run("EmptyBackend", func(t *testing.T) {
		b := h.leaf(t)
		for _, rec := range []bool{false, true} {
			p, err := b.List(ctx(t), "", backend.ListOptions{Recursive: rec})
			if err != nil {
				t.Fatalf("List(\"\", Recursive %v) on an empty backend: %v", rec, err)
			}
			if len(p.Objects)+len(p.Prefixes) != 0 || p.Next != "" {
				t.Fatalf("List on an empty backend = %+v, want an empty last page", p)
			}
		}
	})
	t.Run("OneLevel", func(t *testing.T) {
		b := h.leaf(t)
		h.seedAll(t, b, treeKeys)
		for _, prefix := range []string{"", "b/", "b/c/", "b/c/d/", "c d/", "d/", "é/"} {
			checkLevel(t, b, treeKeys, prefix, 0)
		}
	})
	t.Run("Paging", func(t *testing.T) {
		b := h.leaf(t)
		h.seedAll(t, b, treeKeys)
		objs, prefixes := expectLevel(treeKeys, "")
		total := len(objs) + len(prefixes)
		for _, limit := range []int{1, 2, 3, 4, 7} {
			got := checkLevel(t, b, treeKeys, "", limit)
			if min := (total + limit - 1) / limit; got.pages < min {
				t.Errorf("List(\"\", Limit %d) took %d pages for %d entries: Limit not honoured", limit, got.pages, total)
			}
			rec := checkRecursive(t, b, treeKeys, "", limit)
			if min := (len(treeKeys) + limit - 1) / limit; rec.pages < min {
				t.Errorf("List(\"\", Recursive, Limit %d) took %d pages for %d keys", limit, rec.pages, len(treeKeys))
			}
			checkLevel(t, b, treeKeys, "b/", limit)
			checkRecursive(t, b, treeKeys, "b/", limit)
		}
	})
	t.Run("Recursive", func(t *testing.T) {
		b := h.leaf(t)
		h.seedAll(t, b, treeKeys)
		for _, prefix := range []string{"", "b/", "b/c/", "d/", "é/"} {
			checkRecursive(t, b, treeKeys, prefix, 0)
		}
	})
	t.Run("MissingPrefix", func(t *testing.T) {
		b := h.leaf(t)
		h.seedAll(t, b, treeKeys)
		// "a/" names an object, not a prefix; "b/zz/" is below a real prefix.
		for _, prefix := range []string{"nope/", "a/", "b/zz/", "b/c/d/4/"} {
			for _, rec := range []bool{false, true} {
				p, err := b.List(ctx(t), prefix, backend.ListOptions{Recursive: rec})
				if err != nil {
					t.Fatalf("List(%q, Recursive %v): %v; a missing prefix is an empty page, not an error", prefix, rec, err)
				}
				if len(p.Objects)+len(p.Prefixes) != 0 || p.Next != "" {
					t.Fatalf("List(%q, Recursive %v) = %+v, want empty", prefix, rec, p)
				}
			}
		}
	})
	t.Run("MatchesStat", func(t *testing.T) {
		b := h.leaf(t)
		data := h.seedAll(t, b, treeKeys)
		got := listAll(t, b, "", backend.ListOptions{Recursive: true})
		for _, o := range got.objects {
			st, err := b.Stat(ctx(t), o.Key)
			if err != nil {
				t.Fatalf("Stat(%q) of a listed key: %v", o.Key, err)
			}
			if o.Size != int64(len(data[o.Key])) || o.Size != st.Size || o.Version != st.Version {
				t.Errorf("listed %q size %d version %q; Stat size %d version %q; seeded %d bytes",
					o.Key, o.Size, o.Version, st.Size, st.Version, len(data[o.Key]))
			}
			if o.MTime.IsZero() {
				t.Errorf("listed %q has a zero MTime", o.Key)
			}
		}
	})
	runIf(t, h.Caps.FolderObjects, "FolderObjects", func(t *testing.T) {
		b := h.leaf(t)
		keys := []string{"dir/", "dir/x", "dir/sub/", "top"}
		for _, k := range keys {
			data := []byte("x")
			if strings.HasSuffix(k, "/") {
				data = nil
			}
			h.seed(t, b, k, data)
		}
		checkLevel(t, b, keys, "", 0)
		checkLevel(t, b, keys, "dir/", 0)
		checkLevel(t, b, keys, "dir/", 1)
		checkLevel(t, b, keys, "dir/sub/", 0)
		checkRecursive(t, b, keys, "", 0)
		checkRecursive(t, b, keys, "", 1)
	})
	runIf(t, h.Caps.KeyAndPrefix, "KeyAndPrefix", func(t *testing.T) {
		b := h.leaf(t)
		keys := []string{"kp", "kp/child", "kp0"}
		h.seedAll(t, b, keys)
		checkLevel(t, b, keys, "", 0)
		checkLevel(t, b, keys, "", 1)
		checkLevel(t, b, keys, "kp/", 0)
		checkRecursive(t, b, keys, "", 1)
		if _, err := b.Stat(ctx(t), "kp"); err != nil {
			t.Fatalf("Stat of a key that is also a prefix: %v", err)
		}
	})
}
