package meta

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

func TestMutationsShowAtOnce(t *testing.T) {
	dir := t.TempDir()
	be := newFake(1000, "d/a", "d/b")
	clk := &testClock{}
	ix := openIndex(t, dir)
	c := newCache(t, be, ix, time.Minute, clk)
	readAll(t, c, "d/")
	waitCurrent(t, c, "d/")
	calls := be.lists.Load() + be.stats.Load()

	c.Upsert("d/", Entry{Name: "new", Size: 9, Version: "v9"})
	c.Remove("d/", "a")
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[b new]" {
		t.Fatalf("after upsert+remove: %v", got)
	}
	if e, err := c.Lookup(context.Background(), "d/", "new"); err != nil || e.Size != 9 {
		t.Fatalf("lookup new: %+v %v", e, err)
	}
	if _, err := c.Lookup(context.Background(), "d/", "a"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("removed a: %v", err)
	}
	if n := be.lists.Load() + be.stats.Load() - calls; n != 0 {
		t.Fatalf("mutations cost %d backend calls", n)
	}
	c.Close()
	ix.Close()

	// The changes persist with the listing.
	ix = openIndex(t, dir)
	defer ix.Close()
	c = newCache(t, be, ix, Indefinite, clk)
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[b new]" {
		t.Fatalf("after restart: %v", got)
	}
}

func TestLocalEntriesSurviveRefresh(t *testing.T) {
	be := newFake(1000, "d/a")
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
	c.SetLocal("d/", Entry{Name: "pending.pt", Size: 5, Version: "local:1"})
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[a pending.pt]" {
		t.Fatalf("with a local entry: %v", got)
	}
	clk.ns.Add(int64(2 * time.Minute)) // the listing is refetched; the bucket lacks the file
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[a pending.pt]" {
		t.Fatalf("after refresh: %v", got)
	}
	if e, err := c.Lookup(context.Background(), "d/", "pending.pt"); err != nil || e.Version != "local:1" {
		t.Fatalf("lookup: %+v %v", e, err)
	}
	c.ClearLocal("d/", "pending.pt")
	if _, err := c.Lookup(context.Background(), "d/", "pending.pt"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("after ClearLocal: %v", err)
	}
}

// waitCurrent waits until dir's listing, read in full, is also the
// current one (its load makes it current just after the last reader got
// it). An edit made before that is not applied to the listing: the known
// gap noted in mutate.
func waitCurrent(t *testing.T, c *Cache, dir string) {
	t.Helper()
	ds := c.dir(dir)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ds.mu.Lock()
		cur := ds.cur
		ds.mu.Unlock()
		if cur != nil {
			return
		}
	}
	t.Fatalf("listing of %q never became current", dir)
}

// TestAnEditAfterARestartReachesTheKeptListing: a listing kept in the
// index by an earlier run, and an edit of that directory made before
// this run read the listing (an upload the journal resumed at mount,
// landing at once after a kill -9). The edit went to the point lookup
// only: the directory's first read then loaded the kept listing without
// it, and the file was missing from readdir (after a kill -9 and a
// restart with uploads pending, the whole tree written before the kill
// vanished from the mount once they landed, found by
// TestRandomCallsMatchLocalDisk with restarts). Deletions the same.
func TestAnEditAfterARestartReachesTheKeptListing(t *testing.T) {
	dir := t.TempDir()
	be := newFake(1000, "d/a", "d/gone")
	ix := openIndex(t, dir)
	c := newCache(t, be, ix, Indefinite, &testClock{})
	readAll(t, c, "d/")
	c.Close()
	ix.Close()

	ix = openIndex(t, dir)
	c = newCache(t, be, ix, Indefinite, &testClock{})
	c.Upsert("d/", Entry{Name: "new", Size: 7, Version: "v1"})
	c.Remove("d/", "gone")
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[a new]" {
		t.Fatalf("the directory after the edits: %v, want [a new]", got)
	}
	c.Close()
	ix.Close()

	ix = openIndex(t, dir) // and what the index keeps has them
	defer ix.Close()
	c = newCache(t, be, ix, Indefinite, &testClock{})
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[a new]" {
		t.Fatalf("the directory after another restart: %v, want [a new]", got)
	}
}
