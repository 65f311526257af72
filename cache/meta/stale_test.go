package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestStaleAnswersAreTheNewestKnown: with the backend unreachable, a name
// answers from the most recent thing the cache learnt about it, a point
// lookup or a listing of its directory, whichever was fetched later (the
// README: "names already known answer from the cache"). Before the fix the
// directory's older listing always won: a directory or file found by a
// lookup after its parent's last listing was ENOENT once the bucket was
// gone, and an object seen deleted by a lookup came back.
func TestStaleAnswersAreTheNewestKnown(t *testing.T) {
	ctx := context.Background()
	const ttl = 5 * time.Second
	be := newFake(100, "a", "d/x", "e/y")
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), ttl, clk)
	readAll(t, c, "") // and, in the background, d/ and e/ flat
	waitSplits(t, c, 2)
	readAll(t, c, "d/")
	readAll(t, c, "e/")

	// The listings expire; the bucket changes; lookups find out.
	clk.ns.Add(int64(ttl + time.Second))
	be.put("newdir2/c", 1, "v1")
	be.put("d/new", 1, "v1")
	be.del("a")
	for _, l := range []struct {
		dir, name string
		want      error
	}{
		{"", "newdir2", nil}, {"newdir2/", "c", nil}, {"d/", "new", nil},
		{"", "a", backend.ErrNotExist}, {"e/", "later", backend.ErrNotExist},
	} {
		if _, err := c.Lookup(ctx, l.dir, l.name); !errors.Is(err, l.want) {
			t.Fatalf("lookup %s%s with the backend up: %v, want %v", l.dir, l.name, err, l.want)
		}
	}
	// A listing after a lookup of a name in it is the newer answer.
	clk.ns.Add(int64(time.Second))
	be.put("e/later", 1, "v1")
	readAll(t, c, "e/")

	// The bucket goes away; everything cached is past its TTL.
	be.down.Store(true)
	clk.ns.Add(int64(ttl + time.Second))
	for _, l := range []struct {
		dir, name string
		want      error
		isDir     bool
	}{
		{dir: "", name: "newdir2", isDir: true},
		{dir: "newdir2/", name: "c"},
		{dir: "d/", name: "new"},
		{dir: "d/", name: "x"},
		{dir: "e/", name: "later"},
		{dir: "", name: "a", want: backend.ErrNotExist},
	} {
		e, err := c.Lookup(ctx, l.dir, l.name)
		if !errors.Is(err, l.want) || (err == nil && e.Dir != l.isDir) {
			t.Errorf("lookup %s%s with the backend down: %+v %v, want error %v (directory %v)", l.dir, l.name, e, err, l.want, l.isDir)
		}
	}
	// newdir2/ was looked up, never listed: its listing is not known, and
	// not knowing is EIO (ErrUnavailable), not an empty directory or ENOENT.
	_, _, err := c.OpenDir(ctx, "newdir2/").Next(ctx)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("readdir of a directory never listed, backend down: %v, want ErrUnavailable", err)
	}
}

// TestStaleAnswerFollowsLocalEdits: an edit made through this mount
// (Remove, Upsert) is what a stale answer gives, in a directory known by
// its listing (the edit is newer than the listing) as in one known only by
// point lookups (newer than the lookup).
func TestStaleAnswerFollowsLocalEdits(t *testing.T) {
	ctx := context.Background()
	const ttl = 5 * time.Second
	be := newFake(100, "d/x", "d/y", "p/x", "p/y")
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), ttl, clk)
	readAll(t, c, "d/")
	for _, n := range []string{"x", "y"} {
		if _, err := c.Lookup(ctx, "p/", n); err != nil {
			t.Fatal(err)
		}
	}
	clk.ns.Add(int64(time.Second))
	for _, dir := range []string{"d/", "p/"} {
		c.Remove(dir, "x")
		c.Upsert(dir, Entry{Name: "z", Size: 3, Version: "v9"})
	}

	be.down.Store(true)
	clk.ns.Add(int64(ttl + time.Second))
	for _, dir := range []string{"d/", "p/"} {
		if _, err := c.Lookup(ctx, dir, "x"); !errors.Is(err, backend.ErrNotExist) {
			t.Errorf("%sx removed here, backend down: %v, want ErrNotExist", dir, err)
		}
		if e, err := c.Lookup(ctx, dir, "z"); err != nil || e.Version != "v9" {
			t.Errorf("%sz created here, backend down: %+v %v", dir, e, err)
		}
		if e, err := c.Lookup(ctx, dir, "y"); err != nil || e.Version != "v1" {
			t.Errorf("%sy untouched, backend down: %+v %v", dir, e, err)
		}
	}
}

// TestLookupLeases: an answer may be kept for what is left of the TTL of
// what it came from (the kernel's entry timeouts, README: "Staleness is
// bounded by --metadata-ttl"): a listing loading since its load began, a
// complete listing since it was fetched, a point lookup since it was
// made; a stale answer not at all.
func TestLookupLeases(t *testing.T) {
	ctx := context.Background()
	const ttl = time.Minute
	be := newFake(2, "a", "b", "c", "d")
	be.gate = make(chan struct{})
	clk := &testClock{}
	c := newCache(t, be, openIndex(t, t.TempDir()), ttl, clk)
	lease := func(name string, want time.Duration) {
		t.Helper()
		_, got, err := c.LookupLease(ctx, "", name)
		if err != nil || got != want {
			t.Errorf("lease of %s: %v %v, want %v", name, got, err, want)
		}
	}
	r := c.OpenDir(ctx, "")
	if e, _, err := r.Next(ctx); err != nil || e.Name != "a" {
		t.Fatalf("first page: %+v %v", e, err)
	}
	clk.ns.Add(int64(10 * time.Second)) // the rest of the listing is slow
	lease("a", ttl-10*time.Second)
	if _, got, ok := r.Lookup("a"); !ok || got != ttl-10*time.Second {
		t.Errorf("readdirplus lease of a while loading: %v %v, want %v", got, ok, ttl-10*time.Second)
	}
	close(be.gate)
	readAll(t, c, "")
	waitCurrent(t, c, "")
	clk.ns.Add(int64(40 * time.Second)) // the listing is 40 s old
	lease("b", ttl-40*time.Second)
	r = c.OpenDir(ctx, "")
	if e, _, err := r.Next(ctx); err != nil || e.Name != "a" {
		t.Fatalf("listing: %+v %v", e, err)
	}
	if _, got, ok := r.Lookup("a"); !ok || got != ttl-40*time.Second {
		t.Errorf("readdirplus lease of a: %v %v, want %v", got, ok, ttl-40*time.Second)
	}
	clk.ns.Add(int64(ttl)) // expired: a point lookup, just made
	lease("c", ttl)
	be.down.Store(true)
	clk.ns.Add(int64(2 * ttl))
	lease("c", 0)
}
