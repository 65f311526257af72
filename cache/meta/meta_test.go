package meta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

func newCache(t *testing.T, be backend.Backend, ix *index.Index, ttl time.Duration, clk *testClock) *Cache {
	t.Helper()
	o := DefaultOptions()
	o.TTL = ttl
	if clk.ns.Load() == 0 {
		clk.ns.Store(int64(1e18))
	}
	o.Clock = clk.now
	c := New(be, ix, o)
	t.Cleanup(c.Close)
	return c
}

func openIndex(t *testing.T, dir string) *index.Index {
	t.Helper()
	ix, err := index.Open(dir, index.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func readAll(t *testing.T, c *Cache, dir string) []string {
	t.Helper()
	r := c.OpenDir(context.Background(), dir)
	var out []string
	for {
		e, ok, err := r.Next(context.Background())
		if err != nil {
			t.Fatalf("readdir %q: %v", dir, err)
		}
		if !ok {
			break
		}
		s := e.Name
		if e.Dir {
			s += "/"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func TestChildName(t *testing.T) {
	long := strings.Repeat("x", 256)
	tests := []struct {
		dir, key, name string
		isDir, self    bool
		ok             bool
	}{
		{"", "a", "a", false, false, true},
		{"", "a/", "a", true, false, true},
		{"d/", "d/", "", false, true, false},
		{"d/", "d/x y ü", "x y ü", false, false, true},
		{"d/", "d//", "", true, false, false},
		{"", "/a", "", false, false, false},
		{"d/", "d/..", "", false, false, false},
		{"d/", "d/./", "", true, false, false},
		{"d/", "d/" + long, "", false, false, false},
		{"d/", "d/" + long[:255], long[:255], false, false, true},
		{"d/", "d/a\x00b", "", false, false, false},
		{"d/", "e/x", "", false, false, false},
		{"d/", "d/a/b", "", false, false, false},
	}
	for _, tc := range tests {
		name, isDir, self, ok, reason := ChildName(tc.dir, tc.key)
		if name != tc.name || self != tc.self || ok != tc.ok || (ok && isDir != tc.isDir) {
			t.Errorf("ChildName(%q,%q) = %q dir=%v self=%v ok=%v (%s)", tc.dir, tc.key, name, isDir, self, ok, reason)
		}
	}
}

func FuzzChildName(f *testing.F) {
	f.Add("d/", "d/a")
	f.Add("", "a//b/")
	f.Fuzz(func(t *testing.T, dir, key string) {
		name, isDir, _, ok, _ := ChildName(dir, key)
		if !ok {
			return
		}
		if name == "" || name == "." || name == ".." || len(name) > MaxNameLen ||
			strings.ContainsAny(name, "/\x00") {
			t.Fatalf("ChildName(%q,%q) accepted bad name %q", dir, key, name)
		}
		if Join(dir, name, isDir) != key {
			t.Fatalf("Join does not invert ChildName for %q", key)
		}
	})
}

func TestListingRules(t *testing.T) {
	// "x" is both a key and a prefix, and "x-1".."x-5" sort between "x"
	// and "x/": with 2-entry pages the prefix arrives pages later.
	be := newFake(2, "x", "x-1", "x-2", "x-3", "x-4", "x-5", "x/y", "a//b", "..", "d/", "d/f", "ok")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	got := readAll(t, c, "")
	want := []string{"a/", "d/", "ok", "x-1", "x-2", "x-3", "x-4", "x-5", "x/"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("root listing\n got %v\nwant %v", got, want)
	}
	if got := readAll(t, c, "a/"); len(got) != 0 {
		t.Fatalf("a/ should hide the invalid a//b: %v", got)
	}
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[f]" {
		t.Fatalf("placeholder d/ leaked into its own listing: %v", got)
	}
	e, err := c.Lookup(context.Background(), "", "x")
	if err != nil || !e.Dir {
		t.Fatalf("x: %+v %v (want a directory)", e, err)
	}
}

func TestLookupServedFromListing(t *testing.T) {
	be := newFake(1000, "d/a", "d/b", "d/sub/c")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	readAll(t, c, "d/")
	// Loading d/ queued a background flat listing of d/sub/: let it finish
	// so that its request is not counted as a lookup's.
	waitSplits(t, c, 1)
	before := be.lists.Load() + be.stats.Load()
	for _, n := range []string{"a", "b", "sub"} {
		if _, err := c.Lookup(context.Background(), "d/", n); err != nil {
			t.Fatal(n, err)
		}
	}
	if _, err := c.Lookup(context.Background(), "d/", "missing"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if after := be.lists.Load() + be.stats.Load(); after != before {
		t.Fatalf("lookups after a fresh listing made %d backend calls", after-before)
	}
}

func TestTTLExpiryAndStaleFallback(t *testing.T) {
	be := newFake(1000, "a")
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
	if got := readAll(t, c, ""); fmt.Sprint(got) != "[a]" {
		t.Fatal(got)
	}
	be.put("b", 1, "v1")
	if got := readAll(t, c, ""); fmt.Sprint(got) != "[a]" {
		t.Fatalf("refetched within the TTL: %v", got)
	}
	clk.ns.Add(int64(2 * time.Minute))
	if got := readAll(t, c, ""); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("after TTL: %v", got)
	}
	clk.ns.Add(int64(2 * time.Minute))
	be.down.Store(true)
	if got := readAll(t, c, ""); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("backend down, stale listing: %v", got)
	}
	if _, err := c.Lookup(context.Background(), "", "b"); err != nil {
		t.Fatalf("stale lookup: %v", err)
	}
}

func TestPersistedAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	be := newFake(1000, "d/a", "d/b")
	ix := openIndex(t, dir)
	c := newCache(t, be, ix, Indefinite, &testClock{})
	readAll(t, c, "")
	readAll(t, c, "d/")
	if _, err := c.Lookup(context.Background(), "", "nothere"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatal(err)
	}
	c.Close()
	ix.Close()

	be.down.Store(true)
	ix = openIndex(t, dir)
	defer ix.Close()
	c = newCache(t, be, ix, Indefinite, &testClock{})
	calls := be.lists.Load() + be.stats.Load()
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("restart listing: %v", got)
	}
	if e, err := c.Lookup(context.Background(), "d/", "b"); err != nil || e.Size != 3 {
		t.Fatalf("restart lookup: %+v %v", e, err)
	}
	if _, err := c.Lookup(context.Background(), "", "nothere"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("negative lookup after restart: %v", err)
	}
	if n := be.lists.Load() + be.stats.Load() - calls; n != 0 {
		t.Fatalf("restart with indefinite TTL made %d backend calls", n)
	}
}

func TestPointLookupDirWins(t *testing.T) {
	be := newFake(1000, "p/x", "p/x/y")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	e, err := c.Lookup(context.Background(), "p/", "x")
	if err != nil || !e.Dir {
		t.Fatalf("%+v %v", e, err)
	}
	if _, err := c.Lookup(context.Background(), "p/", "zz"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatal(err)
	}
	calls := be.stats.Load()
	if _, err := c.Lookup(context.Background(), "p/", "zz"); !errors.Is(err, backend.ErrNotExist) || be.stats.Load() != calls {
		t.Fatalf("negative lookup not cached: %v", err)
	}
}

func TestStreamingBeforeListingCompletes(t *testing.T) {
	be := newFake(2, "a", "b", "c", "d")
	be.gate = make(chan struct{})
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	r := c.OpenDir(context.Background(), "")
	// "b" is held back: page 2 could still bring the prefix "b/".
	for _, want := range []string{"a"} {
		e, ok, err := r.Next(context.Background())
		if err != nil || !ok || e.Name != want {
			t.Fatalf("first page: %+v %v %v", e, ok, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, _, err := r.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected to block on the gated page, got %v", err)
	}
	cancel()
	close(be.gate)
	var rest []string
	for {
		e, ok, err := r.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		rest = append(rest, e.Name)
	}
	if fmt.Sprint(rest) != "[b c d]" {
		t.Fatalf("rest %v", rest)
	}
}

func TestMemoryBoundDemotesToIndex(t *testing.T) {
	var keys []string
	for d := range 5 {
		for f := range 50 {
			keys = append(keys, fmt.Sprintf("d%d/f%03d", d, f))
		}
	}
	be := newFake(1000, keys...)
	o := DefaultOptions()
	o.MaxEntries = 60
	o.TTL = Indefinite
	c := New(be, openIndex(t, t.TempDir()), o)
	defer c.Close()
	for d := range 5 {
		if got := readAll(t, c, fmt.Sprintf("d%d/", d)); len(got) != 50 {
			t.Fatalf("d%d: %d entries", d, len(got))
		}
	}
	c.mu.Lock()
	inMem := c.inMem
	c.mu.Unlock()
	if inMem > 60 {
		t.Fatalf("%d entries in memory, bound 60", inMem)
	}
	calls := be.lists.Load() + be.stats.Load()
	if got := readAll(t, c, "d0/"); len(got) != 50 {
		t.Fatalf("demoted listing: %d", len(got))
	}
	if e, err := c.Lookup(context.Background(), "d0/", "f049"); err != nil || e.Name != "f049" {
		t.Fatalf("lookup in demoted listing: %v", err)
	}
	if n := be.lists.Load() + be.stats.Load() - calls; n != 0 {
		t.Fatalf("demoted listing refetched (%d calls)", n)
	}
}

// TestLookupsFailFastWhileTheBackendIsDown: once a lookup has found the
// backend unreachable, the next ones do not wait for it again: names the
// cache knows answer from it (stale), others fail at once, and the backend
// is not asked until a probe after the cooldown finds it back.
func TestLookupsFailFastWhileTheBackendIsDown(t *testing.T) {
	be := newFake(100, "d/known", "d/a", "d/b", "d/c")
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
	ctx := context.Background()
	if _, err := c.Lookup(ctx, "d/", "known"); err != nil {
		t.Fatal(err)
	}
	clk.ns.Add(int64(2 * time.Minute)) // every cached answer is stale now
	be.down.Store(true)
	if _, err := c.Lookup(ctx, "d/", "a"); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("first lookup while down: %v", err)
	}
	calls := be.stats.Load() + be.lists.Load()
	for _, name := range []string{"b", "c", "b"} {
		if _, err := c.Lookup(ctx, "d/", name); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("lookup of %s while down: %v", name, err)
		}
	}
	if e, err := c.Lookup(ctx, "d/", "known"); err != nil || e.Name != "known" {
		t.Fatalf("a known name while down: %+v %v (want the cached entry)", e, err)
	}
	if n := be.stats.Load() + be.lists.Load() - calls; n != 0 {
		t.Fatalf("%d backend calls while it is known to be down, want 0", n)
	}
	be.down.Store(false)
	clk.ns.Add(int64(2 * time.Second)) // the cooldown is over: a probe goes out in the background
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := c.Lookup(ctx, "d/", "b")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lookup after the backend came back: %v", err)
		}
	}
	if _, err := c.Lookup(ctx, "d/", "c"); err != nil {
		t.Fatalf("second lookup after the backend came back: %v", err)
	}
}

// After a restart, lookups racing in one directory all wait for its
// listing to come from the index: none of them asks the backend because
// another caller was still reading the index (seen in the bench: a lookup
// or two per restarted mount went to the bucket).
func TestRestartedLookupsRacingInADirectoryStayLocal(t *testing.T) {
	dir := t.TempDir()
	var keys []string
	for i := 0; i < 64; i++ {
		keys = append(keys, fmt.Sprintf("d/f%02d", i))
	}
	be := newFake(1000, keys...)
	ix := openIndex(t, dir)
	defer ix.Close()
	c := newCache(t, be, ix, time.Hour, &testClock{})
	readAll(t, c, "d/")
	c.Close()

	for round := 0; round < 200; round++ {
		c := newCache(t, be, ix, time.Hour, &testClock{})
		calls := be.lists.Load() + be.stats.Load()
		start := make(chan struct{})
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			go func(g int) {
				<-start
				_, err := c.Lookup(context.Background(), "d/", fmt.Sprintf("f%02d", g*8+round%8))
				errs <- err
			}(g)
		}
		close(start)
		for g := 0; g < 8; g++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		if n := be.lists.Load() + be.stats.Load() - calls; n != 0 {
			t.Fatalf("round %d: lookups racing after a restart made %d backend calls", round, n)
		}
	}
}
