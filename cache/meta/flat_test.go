package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// waitSplits waits until the cache has finished n flat listings and runs
// none (splits queued by a running one count as running).
func waitSplits(t *testing.T, c *Cache, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.pf.mu.Lock()
		done, running := c.pf.done, c.pf.running
		c.pf.mu.Unlock()
		if done >= n && running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d subtree listings finished (%d running)", done, n, running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// walk lists dir and everything under it, and looks every name up: the
// tree as a user sees it ("dir/name" and "dir/name/" lines).
func walk(t *testing.T, c *Cache, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range readAll(t, c, dir) {
		out = append(out, dir+n)
		name, isDir := n, false
		if n[len(n)-1] == '/' {
			name, isDir = n[:len(n)-1], true
		}
		e, err := c.Lookup(context.Background(), dir, name)
		if err != nil || e.Dir != isDir {
			t.Fatalf("Lookup(%q, %q) = %+v, %v after readdir showed it", dir, name, e, err)
		}
		if isDir {
			out = append(out, walk(t, c, dir+n)...)
		}
	}
	return out
}

// treeKeys is a tree of dirs*subs leaf directories with files keys each.
func treeKeys(dirs, subs, files int) []string {
	var keys []string
	for d := range dirs {
		for s := range subs {
			for f := range files {
				keys = append(keys, fmt.Sprintf("top/d%02d/s%02d/k%03d", d, s, f))
			}
		}
	}
	return append(keys, "top/readme", "rootfile")
}

// reference walks be with the prefetch off: what a delimited listing of
// each directory shows.
func reference(t *testing.T, be backend.Backend) []string {
	t.Helper()
	o := DefaultOptions()
	o.ListPrefetch = 0
	c := New(be, openIndex(t, t.TempDir()), o)
	defer c.Close()
	return walk(t, c, "")
}

func TestPrefetchListsTheTreeFlat(t *testing.T) {
	be := newFake(50, treeKeys(6, 5, 7)...) // 30 leaves of 7 keys
	want := reference(t, be)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	be.lists.Store(0)
	readAll(t, c, "")
	waitSplits(t, c, 1) // "top/", then the subdirectories it fans out to
	before := be.lists.Load()
	got := walk(t, c, "")
	if !slices.Equal(got, want) {
		t.Fatalf("walk after prefetch\n got %q\nwant %q", got, want)
	}
	// The walk sends nothing; the prefetch far fewer requests than the
	// 38 directories (with 16 workers, top/ fans out to d00/..d05/).
	if after := be.lists.Load(); after != before {
		t.Errorf("walking the prefetched tree sent %d list requests, want 0", after-before)
	}
	if before > 12 {
		t.Errorf("root listing plus prefetch took %d list requests, want <= 12", before)
	}
	t.Logf("%d list requests, %d flat", before, be.flats.Load())
}

func TestPrefetchNamespaceRules(t *testing.T) {
	// Raw key order is not name order ("a-b/x" < "a/x" but "a" < "a-b");
	// "a" is both a key and a prefix; "dir/" markers; empty segments, dot
	// segments; with 3-key pages the prefix "a/" arrives pages after "a".
	be := newFake(3,
		"t/a", "t/a-b/x", "t/a.c", "t/a/x", "t/a/y/", "t/a/y/z", "t/a0",
		"t/m/", "t/m/n/", "t/e//f", "t/e/g", "t/./h", "t/q/../r", "t/q/s",
		"t/z", "t/z-1", "t/z-2", "t/z/w")
	want := reference(t, be)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	readAll(t, c, "")
	waitSplits(t, c, 1)
	before := be.lists.Load()
	if got := walk(t, c, ""); !slices.Equal(got, want) {
		t.Fatalf("walk after prefetch\n got %q\nwant %q", got, want)
	}
	if after := be.lists.Load(); after != before {
		t.Errorf("walk sent %d list requests, want 0", after-before)
	}
}

func TestPrefetchPersistsAndSkipsFreshSubtrees(t *testing.T) {
	be := newFake(1000, treeKeys(3, 3, 2)...)
	dir := t.TempDir()
	ix := openIndex(t, dir)
	clk := &testClock{}
	c := newCache(t, be, ix, time.Minute, clk)
	readAll(t, c, "")
	waitSplits(t, c, 1)
	want := walk(t, c, "")

	// Reloading the root (as after its own expiry) does not list fresh
	// subtrees again.
	c.Invalidate("")
	flats := be.flats.Load()
	readAll(t, c, "")
	c.Close()
	if be.flats.Load() != flats {
		t.Errorf("a fresh subtree was listed again")
	}

	// A restart serves the prefetched listings from the index.
	clk.ns.Add(int64(time.Second))
	c2 := newCache(t, be, ix, time.Minute, clk)
	lists := be.lists.Load()
	if got := walk(t, c2, "top/"); !slices.Equal(got, want[2:]) {
		t.Fatalf("after restart\n got %q\nwant %q", got, want[2:])
	}
	if n := be.lists.Load() - lists; n != 0 {
		t.Errorf("walking after a restart sent %d list requests, want 0", n)
	}
}

func TestPrefetchKeepsLocalEntries(t *testing.T) {
	be := newFake(1000, treeKeys(2, 2, 2)...)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	c.SetLocal("top/d01/s00/", Entry{Name: "new", Size: 3, Local: true})
	readAll(t, c, "")
	waitSplits(t, c, 1)
	got := readAll(t, c, "top/d01/s00/")
	if want := []string{"k000", "k001", "new"}; !slices.Equal(got, want) {
		t.Fatalf("readdir = %q, want %q", got, want)
	}
	if e, err := c.Lookup(context.Background(), "top/d01/s00/", "new"); err != nil || !e.Local {
		t.Fatalf("Lookup of the local file = %+v, %v", e, err)
	}
}

// gatedSplit starts a prefetch of "top/" whose second page waits until
// the returned func is called (3 keys a page: top/d00/s00/ is read and
// still open when it stops).
func gatedSplit(t *testing.T, keys ...string) (*fakeBackend, *Cache, *testClock, func()) {
	t.Helper()
	be := newFake(3, keys...)
	be.gateFlat = make(chan struct{})
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
	c.pf.max = 1 // one split, no fan-out
	// A readdir inside the stuck split lists for itself after this.
	c.splitWait = 50 * time.Millisecond
	readAll(t, c, "")
	deadline := time.Now().Add(20 * time.Second)
	for be.flats.Load() < 2 { // the first page is in, the second waits
		if time.Now().After(deadline) {
			t.Fatal("the subtree listing did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	clk.ns.Add(int64(time.Second))
	return be, c, clk, func() { close(be.gateFlat) }
}

func TestPrefetchDoesNotOverwriteFresherListings(t *testing.T) {
	be, c, _, release := gatedSplit(t, "top/d00/s00/k1", "top/d00/s00/k2", "top/d00/s00/k3", "top/d00/s01/k1", "top/d01/s00/k1")
	// Meanwhile s00 changes and is listed again, and s01 is edited here.
	be.put("top/d00/s00/k0", 1, "v1")
	if got := readAll(t, c, "top/d00/s00/"); len(got) != 4 {
		t.Fatalf("delimited reload = %q", got)
	}
	c.Upsert("top/d00/s01/", Entry{Name: "k9", Size: 1})
	release()
	waitSplits(t, c, 1)
	if got := readAll(t, c, "top/d00/s00/"); len(got) != 4 {
		t.Errorf("the older flat listing replaced the fresher one: %q", got)
	}
	if _, err := c.Lookup(context.Background(), "top/d00/s01/", "k9"); err != nil {
		t.Errorf("the flat listing lost a local edit: %v", err)
	}
	// d01/s00 had nothing newer: it was installed.
	lists := be.lists.Load()
	readAll(t, c, "top/d01/s00/")
	if be.lists.Load() != lists {
		t.Errorf("top/d01/s00/ was not installed")
	}
}

func TestPrefetchErrorLeavesTheRestToLoads(t *testing.T) {
	be := newFake(3, "top/a/1", "top/a/2", "top/b/1", "top/b/2", "top/c/1")
	be.failFlat.Store(true) // the second page of a flat listing fails
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	c.pf.max = 1 // one split, no fan-out
	// A readdir inside the stuck split lists for itself after this.
	c.splitWait = 50 * time.Millisecond
	readAll(t, c, "")
	waitSplits(t, c, 1)
	lists := be.lists.Load()
	if got := readAll(t, c, "top/a/"); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("top/a/ = %q", got)
	}
	if be.lists.Load() != lists {
		t.Errorf("top/a/, sealed before the error, was not installed")
	}
	if got := readAll(t, c, "top/b/"); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("top/b/ = %q", got)
	}
	if be.lists.Load() == lists {
		t.Errorf("top/b/, not sealed before the error, was not loaded")
	}
	if got := readAll(t, c, "top/"); !slices.Equal(got, []string{"a/", "b/", "c/"}) {
		t.Fatalf("top/ = %q", got)
	}
}

func TestPrefetchStopsOnClose(t *testing.T) {
	be, c, _, _ := gatedSplit(t, "top/a/1", "top/a/2", "top/a/3", "top/b/1")
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not stop a running subtree listing")
	}
	n := be.lists.Load()
	time.Sleep(50 * time.Millisecond)
	if be.lists.Load() != n {
		t.Error("list requests after Close")
	}
}

func TestPrefetchCapFallsBackToLoads(t *testing.T) {
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("top/big/k%02d", i))
	}
	be := newFake(10, append(keys, "top/small/x")...)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	c.pf.maxHeld, c.pf.max = 15, 1
	readAll(t, c, "")
	waitSplits(t, c, 1)
	lists := be.lists.Load()
	if got := readAll(t, c, "top/big/"); len(got) != 30 {
		t.Fatalf("top/big/ = %d entries", len(got))
	}
	if be.lists.Load() == lists {
		t.Error("a directory past the cap was not loaded the normal way")
	}
}

func TestPrefetchOffWhileTheBackendIsDown(t *testing.T) {
	be := newFake(1000, treeKeys(2, 2, 2)...)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	readAll(t, c, "")
	waitSplits(t, c, 1)
	be.down.Store(true)
	// Served from the prefetched listings with the backend gone.
	r := c.OpenDir(context.Background(), "top/d01/s01/")
	if _, ok, err := r.Next(context.Background()); !ok || err != nil {
		t.Fatalf("readdir with the backend down: %v %v", ok, err)
	}
	_, err := c.Lookup(context.Background(), "top/d01/s01/", "nope")
	if !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("negative lookup from a prefetched listing = %v", err)
	}
}

func TestPrefetchQueueDroppedWhenTheBackendGoesAway(t *testing.T) {
	be := newFake(3, "a/1", "a/2", "a/3", "a/4", "b/1", "c/1", "d/1")
	be.gateFlat = make(chan struct{})
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	c.pf.max = 1 // a/ runs, b/ c/ d/ wait
	readAll(t, c, "")
	for deadline := time.Now().Add(20 * time.Second); be.flats.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the subtree listing did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	be.down.Store(true)
	close(be.gateFlat) // a/ completes with the page it asked for; b/ fails
	waitSplits(t, c, 2)
	c.pf.mu.Lock()
	done, queued, pending := c.pf.done, len(c.pf.queue), len(c.pf.pending)
	c.pf.mu.Unlock()
	if done != 2 || queued != 0 || pending != 0 {
		t.Errorf("after the backend went away: %d splits run, %d queued, %d pending; want 2, 0, 0", done, queued, pending)
	}
	if got := readAll(t, c, "a/"); len(got) != 4 {
		t.Errorf("a/, listed before the backend went away = %q", got)
	}
}

func TestPrefetchLongSplitDoesNotHoldBackANewOne(t *testing.T) {
	be := newFake(3, "a/1", "a/2", "a/3", "a/4")
	be.gateFlat = make(chan struct{})
	defer close(be.gateFlat)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	readAll(t, c, "") // a/ is listed and stops at its second page
	for deadline := time.Now().Add(20 * time.Second); be.flats.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the subtree listing did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	be.put("x/y/1", 1, "v1")
	readAll(t, c, "x/") // not under a/: its subdirectory y/ is prefetched now
	for deadline := time.Now().Add(20 * time.Second); ; {
		c.pf.mu.Lock()
		done := c.pf.done
		c.pf.mu.Unlock()
		if done == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("x/y/ waited for the running listing of a/")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPrefetchDropsWhatARefreshInvalidated(t *testing.T) {
	be, c, _, release := gatedSplit(t, "top/d00/s00/k1", "top/d00/s00/k2", "top/d00/s00/k3", "top/d00/s01/k1", "top/d01/s00/k1")
	be.del("top/d00/s00/k1") // after the split read it
	c.RefreshAll("top/d00/")
	release()
	waitSplits(t, c, 1)
	lists := be.lists.Load()
	if got := readAll(t, c, "top/d00/s00/"); len(got) != 2 {
		t.Errorf("after a refresh, readdir = %q: the older flat listing was installed", got)
	}
	if be.lists.Load() == lists {
		t.Error("a directory refreshed during the subtree listing was served from it")
	}
	lists = be.lists.Load()
	readAll(t, c, "top/d01/s00/")
	if be.lists.Load() != lists {
		t.Error("top/d01/s00/, outside the refresh, was not installed")
	}
}

func TestPrefetchSkipsSubtreesNobodyWalked(t *testing.T) {
	be := newFake(1000, treeKeys(2, 2, 2)...)
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
	readAll(t, c, "")
	waitSplits(t, c, 1)
	flats := be.flats.Load()

	// The root listed again past the TTL, nothing under it read: its
	// subtrees are not listed again.
	clk.ns.Add(int64(2 * time.Minute))
	readAll(t, c, "")
	time.Sleep(50 * time.Millisecond) // what a prefetch would take to start
	if n := be.flats.Load() - flats; n != 0 {
		t.Fatalf("a subtree nobody walked was listed again (%d requests)", n)
	}

	// Walked into (top/'s own load prefetches below it), they are
	// prefetched again at the root's next expiry.
	readAll(t, c, "top/")
	waitSplits(t, c, 3) // top/d00/, top/d01/
	clk.ns.Add(int64(2 * time.Minute))
	flats = be.flats.Load()
	readAll(t, c, "")
	waitSplits(t, c, 4)
	if be.flats.Load() == flats {
		t.Fatal("a subtree walked since its prefetch was not listed again")
	}
}

func TestPrefetchDoesNotFanOutOverSmallSubdirectories(t *testing.T) {
	be := newFake(50, treeKeys(20, 1, 5)...) // top/ holds 20 directories of 5 keys
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	readAll(t, c, "")
	waitSplits(t, c, 1)
	// 101 keys under top/: 3 flat pages, and no request per directory.
	if flats, lists := be.flats.Load(), be.lists.Load(); flats != 3 || lists != 4 {
		t.Errorf("%d list requests, %d of them flat; want 4 and 3", lists, flats)
	}
	before := be.lists.Load()
	walk(t, c, "")
	if n := be.lists.Load() - before; n != 0 {
		t.Errorf("walk sent %d list requests, want 0", n)
	}
}

// TestPrefetchStopsAfterItsDirectoryBudget: the prefetch installs at most
// maxDirs directories in a Cache's life (an ls of a huge bucket's root
// must not list it all, nor keep every directory known); past it nothing
// more is queued, and the tree still walks right, the rest loaded the
// normal way.
func TestPrefetchStopsAfterItsDirectoryBudget(t *testing.T) {
	be := newFake(50, treeKeys(6, 5, 7)...) // 38 directories
	want := reference(t, be)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	c.pf.maxDirs, c.pf.max = 4, 1
	readAll(t, c, "")
	waitSplits(t, c, 1)
	c.pf.mu.Lock()
	dirs, spent, queued := c.pf.dirs, c.pf.spent, len(c.pf.queue)
	c.pf.mu.Unlock()
	if !spent || dirs != 4 || queued != 0 {
		t.Fatalf("after the budget: %d directories installed, spent %v, %d queued; want 4, true, 0", dirs, spent, queued)
	}
	before := be.lists.Load()
	if got := walk(t, c, ""); !slices.Equal(got, want) {
		t.Fatalf("walk past the budget\n got %q\nwant %q", got, want)
	}
	if be.lists.Load()-before < 30 {
		t.Errorf("walk past the budget sent %d list requests: the rest should load per directory", be.lists.Load()-before)
	}
	c.pf.mu.Lock()
	defer c.pf.mu.Unlock()
	if c.pf.dirs != 4 {
		t.Errorf("the prefetch went on after its budget: %d directories installed", c.pf.dirs)
	}
}

// TestWalkRidesARunningSplit: a walk that starts at once, before the flat
// listing's first page is back, waits for it inside the subtree instead
// of listing every directory itself (the race a slow machine loses).
func TestWalkRidesARunningSplit(t *testing.T) {
	be := newFake(1000, treeKeys(4, 3, 2)...) // "", top/, 4 dirs, 12 leaves
	be.firstFlat = make(chan struct{})
	want := reference(t, be)
	be.lists.Store(0)
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	done := make(chan []string)
	go func() { done <- walk(t, c, "") }()
	// The walker lists "" and top/ (the split's root) itself and then
	// reaches top/d00/, inside the split; give it time to go on alone.
	time.Sleep(200 * time.Millisecond)
	close(be.firstFlat)
	got := <-done
	if !slices.Equal(got, want) {
		t.Fatalf("walk\n got %q\nwant %q", got, want)
	}
	// "", top/ and the split's one page.
	if n := be.lists.Load(); n != 3 {
		t.Errorf("the walk and the prefetch sent %d list requests for 18 directories, want 3", n)
	}
}

// TestReaddirDoesNotWaitLongForAStuckSplit: a split whose next page does
// not come holds a readdir inside it back for splitWait, no longer.
func TestReaddirDoesNotWaitLongForAStuckSplit(t *testing.T) {
	_, c, _, release := gatedSplit(t, "top/d00/s00/k1", "top/d00/s00/k2", "top/d00/s00/k3", "top/d00/s00/k4", "top/d01/s00/k1")
	defer release()
	c.splitWait = 300 * time.Millisecond
	start := time.Now()
	if got := readAll(t, c, "top/d00/s00/"); len(got) != 4 {
		t.Fatalf("readdir = %q", got)
	}
	if d := time.Since(start); d < c.splitWait {
		t.Errorf("readdir inside the split being listed returned after %v, before the split's next page or %v", d, c.splitWait)
	}
}
