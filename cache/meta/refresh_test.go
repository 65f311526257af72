package meta

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stratafs/strata/backend"
)

// With an indefinite TTL nothing is ever fetched again by itself: Refresh
// is how one name, or a whole tree, is made to match the bucket, in this
// run and in listings kept by the index from an earlier one.
func TestRefreshUnderIndefiniteTTL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	be := newFake(1000, "d/a", "d/b", "d/sub/c", "other/x")
	clk := &testClock{}
	ix := openIndex(t, dir)
	c := newCache(t, be, ix, Indefinite, clk)
	for _, d := range []string{"d/", "d/sub/", "other/"} {
		readAll(t, c, d)
		waitCurrent(t, c, d)
	}
	if _, err := c.Lookup(ctx, "d/", "a"); err != nil {
		t.Fatal(err)
	}

	// One name, changed in the bucket.
	be.put("d/a", 77, "v2")
	if e, _ := c.Lookup(ctx, "d/", "a"); e.Version != "v1" {
		t.Fatalf("before refresh: %+v (the indefinite TTL trusts v1)", e)
	}
	if e, err := c.Refresh(ctx, "d/", "a"); err != nil || e.Version != "v2" || e.Size != 77 {
		t.Fatalf("refresh d/a: %+v %v", e, err)
	}
	if e, err := c.Lookup(ctx, "d/", "a"); err != nil || e.Version != "v2" {
		t.Fatalf("lookup after refresh: %+v %v", e, err)
	}

	// The backend down: an error, and nothing forgotten.
	be.down.Store(true)
	if _, err := c.Refresh(ctx, "d/", "b"); err == nil {
		t.Fatal("refresh with the backend down succeeded")
	}
	if e, err := c.Lookup(ctx, "d/", "b"); err != nil || e.Version != "v1" {
		t.Fatalf("lookup after a failed refresh: %+v %v", e, err)
	}
	be.down.Store(false)
	c.Close()
	ix.Close()

	// A restart: the listings come from the index. A name gone from the
	// bucket, refreshed before its listing was read in this run.
	ix = openIndex(t, dir)
	t.Cleanup(func() { ix.Close() }) // after c's Close (cleanups run last first)
	c = newCache(t, be, ix, Indefinite, clk)
	be.mu.Lock()
	delete(be.objs, "d/b")
	be.mu.Unlock()
	if _, err := c.Refresh(ctx, "d/", "b"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("refresh of a deleted name: %v", err)
	}
	if got := readAll(t, c, "d/"); fmt.Sprint(got) != "[a sub/]" {
		t.Fatalf("d/ after refreshing the deleted b: %v", got)
	}

	// A whole tree: listings of the earlier run, never read in this one,
	// are dropped too.
	be.put("d/sub/new", 5, "v1")
	be.put("other/y", 5, "v1")
	c.RefreshAll("")
	if got := readAll(t, c, "d/sub/"); fmt.Sprint(got) != "[c new]" {
		t.Fatalf("d/sub/ after refreshing everything: %v", got)
	}
	if got := readAll(t, c, "other/"); fmt.Sprint(got) != "[x y]" {
		t.Fatalf("other/ after refreshing everything: %v", got)
	}
}
