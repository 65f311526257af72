package backendtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

// CheckPage verifies one page of List(prefix, opt) on its own: objects and
// prefixes each strictly increasing in byte order, everything under prefix,
// prefixes one level down and ending in "/", non-recursive objects one
// level down (or equal to prefix: a folder placeholder), no prefixes when
// recursive, and at most opt.Limit entries.
func CheckPage(prefix string, opt backend.ListOptions, p backend.ListPage) error {
	if opt.Limit > 0 && len(p.Objects)+len(p.Prefixes) > opt.Limit {
		return fmt.Errorf("page has %d objects + %d prefixes, above Limit %d",
			len(p.Objects), len(p.Prefixes), opt.Limit)
	}
	for i, o := range p.Objects {
		if i > 0 && o.Key <= p.Objects[i-1].Key {
			return fmt.Errorf("objects not strictly increasing: %q then %q", p.Objects[i-1].Key, o.Key)
		}
		if !strings.HasPrefix(o.Key, prefix) {
			return fmt.Errorf("object %q outside prefix %q", o.Key, prefix)
		}
		if !opt.Recursive && strings.Contains(o.Key[len(prefix):], "/") {
			return fmt.Errorf("object %q is more than one level below %q in a non-recursive listing", o.Key, prefix)
		}
		if o.Version == "" {
			return fmt.Errorf("object %q has an empty Version", o.Key)
		}
		if o.Size < 0 {
			return fmt.Errorf("object %q has negative size %d", o.Key, o.Size)
		}
	}
	if opt.Recursive && len(p.Prefixes) > 0 {
		return fmt.Errorf("recursive listing returned prefixes %q", p.Prefixes)
	}
	for i, d := range p.Prefixes {
		if i > 0 && d <= p.Prefixes[i-1] {
			return fmt.Errorf("prefixes not strictly increasing: %q then %q", p.Prefixes[i-1], d)
		}
		rest, ok := strings.CutPrefix(d, prefix)
		if !ok || !strings.HasSuffix(rest, "/") || strings.Contains(rest[:len(rest)-1], "/") {
			return fmt.Errorf("prefix %q is not one level below %q ending in /", d, prefix)
		}
	}
	return nil
}

// CheckPageOrder verifies that every entry of next sorts after every entry
// of prev, so that pages merge into one ordered stream.
func CheckPageOrder(prev, next backend.ListPage) error {
	last, ok := pageMax(prev)
	if !ok {
		return nil
	}
	first, ok := pageMin(next)
	if !ok {
		return nil
	}
	if first <= last {
		return fmt.Errorf("page starts at %q, not after the previous page's last entry %q", first, last)
	}
	return nil
}

func pageMax(p backend.ListPage) (string, bool) {
	var m string
	ok := false
	if n := len(p.Objects); n > 0 {
		m, ok = p.Objects[n-1].Key, true
	}
	if n := len(p.Prefixes); n > 0 && (!ok || p.Prefixes[n-1] > m) {
		m, ok = p.Prefixes[n-1], true
	}
	return m, ok
}

func pageMin(p backend.ListPage) (string, bool) {
	var m string
	ok := false
	if len(p.Objects) > 0 {
		m, ok = p.Objects[0].Key, true
	}
	if len(p.Prefixes) > 0 && (!ok || p.Prefixes[0] < m) {
		m, ok = p.Prefixes[0], true
	}
	return m, ok
}

// listing is a whole listing gathered from all its pages.
type listing struct {
	objects  []backend.ObjectInfo
	prefixes []string
	pages    int
}

func (l listing) keys() []string {
	k := make([]string, len(l.objects))
	for i, o := range l.objects {
		k[i] = o.Key
	}
	return k
}

// maxPages bounds listAll so a backend whose tokens never end fails.
const maxPages = 10000

// listAll follows Next to the end, checking every page and page order.
func listAll(t *testing.T, b backend.Backend, prefix string, opt backend.ListOptions) listing {
	t.Helper()
	var all listing
	var prev backend.ListPage
	opt.Token = ""
	for {
		p, err := b.List(ctx(t), prefix, opt)
		if err != nil {
			t.Fatalf("List(%q, %+v) page %d: %v", prefix, opt, all.pages+1, err)
		}
		all.pages++
		if err := CheckPage(prefix, opt, p); err != nil {
			t.Fatalf("List(%q, %+v) page %d: %v", prefix, opt, all.pages, err)
		}
		if err := CheckPageOrder(prev, p); err != nil {
			t.Fatalf("List(%q, %+v) page %d: %v", prefix, opt, all.pages, err)
		}
		if _, ok := pageMax(p); ok {
			prev = p
		}
		all.objects = append(all.objects, p.Objects...)
		all.prefixes = append(all.prefixes, p.Prefixes...)
		if p.Next == "" {
			return all
		}
		if p.Next == opt.Token {
			t.Fatalf("List(%q) returned the token it was given (%q): the listing would never end", prefix, p.Next)
		}
		if all.pages >= maxPages {
			t.Fatalf("List(%q) still going after %d pages", prefix, maxPages)
		}
		opt.Token = p.Next
	}
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}
