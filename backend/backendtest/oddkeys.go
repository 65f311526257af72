package backendtest

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

// oddKeys are valid on every backend, local paths included.
var oddKeys = []string{
	"sp ace/file name.txt",
	"sp ace/ leading and trailing ",
	"unicode/日本語.txt",
	"unicode/ünïcødé",
	"unicode/emoji-😀",
	"dots/..x",
	"dots/x..",
	"dots/...",
	"dots/.hidden",
	"dots/..../y",
	"sym/a+b=c&d;e,f@g",
	"sym/%41%2F",
	"sym/#hash?q=1",
	"sym/it's \"quoted\"",
	"sym/~tilde!$",
	"sym/[br]{ce}(pa)",
	"sym/back\\slash",
	"sym/<lt>gt",
}

// longKey returns a key of exactly n bytes under dir whose segments are at
// most seg bytes long.
func longKey(dir string, n, seg int) string {
	var b strings.Builder
	b.WriteString(dir)
	for b.Len() < n {
		left := n - b.Len()
		if b.Len() > len(dir) {
			b.WriteByte('/')
			left--
		}
		if left > seg {
			left = seg
			if n-b.Len()-left == 1 { // avoid ending on a bare "/"
				left--
			}
		}
		b.WriteString(strings.Repeat(string(rune('a'+b.Len()%26)), left))
	}
	return b.String()
}

func testOddKeys(t *testing.T, h Harness) {
	t.Run("Portable", func(t *testing.T) {
		b := h.leaf(t)
		checkKeys(t, h, b, oddKeys)
	})
	runIf(t, h.Caps.LongKeys, "LongKeys", func(t *testing.T) {
		b := h.leaf(t)
		k := longKey("long/", 1000, 200)
		if len(k) != 1000 {
			t.Fatalf("test bug: long key is %d bytes", len(k))
		}
		checkKeys(t, h, b, []string{k, "long/short"})
	})
	runIf(t, h.Caps.NonPathKeys, "NonPathKeys", func(t *testing.T) {
		b := h.leaf(t)
		checkKeys(t, h, b, []string{
			"raw/a//b", "raw/./x", "raw/../y", "raw/z/.", "raw//lead",
			"raw/" + strings.Repeat("s", 996),
		})
	})
	runIf(t, h.Caps.ControlKeys, "ControlKeys", func(t *testing.T) {
		b := h.leaf(t)
		checkKeys(t, h, b, controlKeys)
	})
}

// controlKeys hold characters an XML listing cannot carry, and characters
// that only survive a URL-encoded listing if decoded exactly.
var controlKeys = []string{
	"odd/\x01ctl",
	"odd/unit\x1fsep",
	"odd/tab\there",
	"odd/new\nline",
	"odd/cr\rreturn",
	"odd/percent%41",
	"odd/plus+space x",
	"odd/\x02dir/child",
	"odd/sp ace dir/child",
	"odd/pct%2Fdir/child",
	"odd/plain",
	"odd\x03top",
}

// checkKeys seeds keys, then checks that each one stats, reads back and
// shows up in both kinds of listing of its parent.
func checkKeys(t *testing.T, h Harness, b backend.Backend, keys []string) {
	t.Helper()
	data := h.seedAll(t, b, keys)
	for _, k := range keys {
		info, err := b.Stat(ctx(t), k)
		if err != nil {
			t.Errorf("Stat(%q): %v", k, err)
			continue
		}
		if info.Key != k || info.Size != int64(len(data[k])) {
			t.Errorf("Stat(%q) = key %q size %d, want size %d", k, info.Key, info.Size, len(data[k]))
		}
		mustRead(t, b, k, info.Version, 0, data[k])
	}
	checkRecursive(t, b, keys, "", 0)
	checkRecursive(t, b, keys, "", 3)
	parents := map[string]bool{"": true}
	for _, k := range keys {
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			parents[k[:i+1]] = true
		}
	}
	for p := range parents {
		checkLevel(t, b, keys, p, 0)
	}
	// Each key is found by listing its own parent.
	for _, k := range keys {
		parent := ""
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			parent = k[:i+1]
		}
		got := listAll(t, b, parent, backend.ListOptions{})
		if !slices.Contains(got.keys(), k) {
			t.Errorf("List(%q) = %q, missing %q (%s)", parent, got.keys(), k, path.Base(k))
		}
	}
}
