package meta

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestAnEditDuringALoadIsKept: a file's upload lands (Upsert) or a name
// is removed while its directory's listing is being fetched, the LIST
// having been answered before the change; the listing then became
// current without the edit, and the directory showed the bucket as it
// was listed until the TTL ran out: a file just written and closed
// missing from `ls` for a minute, a deleted one still there (found by
// TestRandomCallsMatchLocalDisk). A first load and a reload alike.
func TestAnEditDuringALoadIsKept(t *testing.T) {
	for _, reload := range []bool{false, true} {
		be := newFake(2, "b", "c", "d", "e")
		clk := &testClock{}
		c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
		ctx := context.Background()
		if reload {
			readAll(t, c, "")
			waitCurrent(t, c, "")
			clk.ns.Add(int64(2 * time.Minute)) // expired: the next readdir loads it again
		}
		be.gate = make(chan struct{})
		r := c.OpenDir(ctx, "")
		if e, _, err := r.Next(ctx); err != nil || e.Name != "b" {
			t.Fatalf("first page: %+v %v", e, err)
		}
		// Its first page is in: "a" sorts before it, and "c" was on it.
		be.put("a", 1, "v1")
		c.Upsert("", Entry{Name: "a", Size: 1, Version: "v1"})
		be.del("c")
		c.Remove("", "c")
		close(be.gate)
		if err := r.l.wait(ctx); err != nil {
			t.Fatal(err)
		}
		streamed := []string{"b"}
		for {
			e, ok, err := r.Next(ctx)
			if err != nil || !ok {
				break
			}
			streamed = append(streamed, e.Name)
		}
		// The readdir that was under way when the edits were made: it
		// shows them too (the file's local entry went when its upload
		// landed, so nothing else would show it).
		if !slices.Contains(streamed, "a") || slices.Contains(streamed, "c") {
			t.Errorf("reload %v: the readdir under way lists %q, want a and no c", reload, streamed)
		}
		waitCurrent(t, c, "")
		if got := readAll(t, c, ""); !slices.Contains(got, "a") || slices.Contains(got, "c") {
			t.Errorf("reload %v: the directory lists %q after the load, want a and no c (added and removed during it)", reload, got)
		}
		if _, err := c.Lookup(ctx, "", "a"); err != nil {
			t.Errorf("reload %v: lookup of the file added during the load: %v", reload, err)
		}
		if _, err := c.Lookup(ctx, "", "c"); err == nil {
			t.Errorf("reload %v: the file removed during the load is found", reload)
		}
	}
}

// TestAReaddirShowsAFileWhoseUploadLandsAsItReads: a file written here is
// shown from its local entry until its upload lands; then the bucket's
// entry goes into the listing (Upsert) and the local entry goes. A readdir
// opened just before the upsert streams the listing as it was, and it
// looked for local entries only at the end of it, after they were gone:
// the file was in neither (found by TestRandomCallsMatchLocalDisk: `ls`
// straight after a close, in --upload sync, missing the file just closed).
func TestAReaddirShowsAFileWhoseUploadLandsAsItReads(t *testing.T) {
	be := newFake(100, "a", "b")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	ctx := context.Background()
	readAll(t, c, "")
	waitCurrent(t, c, "")
	c.SetLocal("", Entry{Name: "new", Size: 3, Version: "local:1", Local: true})
	r := c.OpenDir(ctx, "")
	// The upload lands: the bucket's entry, then the local one goes.
	be.put("new", 3, "v1")
	c.Upsert("", Entry{Name: "new", Size: 3, Version: "v1"})
	c.ClearLocal("", "new")
	var got []string
	for {
		e, ok, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, e.Name)
	}
	if !slices.Equal(got, []string{"a", "b", "new"}) {
		t.Errorf("the readdir lists %q, want [a b new]", got)
	}
}

// TestALookupDuringALoadSeesTheEditsMadeDuringIt: a lookup answered from
// a listing still loading found a name on a page listed before the name
// changed: a file's rewrite whose upload landed (Upsert) meanwhile read
// as the version listed, and a node that refreshed then took that older
// version for good (a file closed at 458 bytes stat'd at its previous
// 1 MiB, found by TestRandomCallsMatchLocalDisk); a file deleted meanwhile
// was found.
func TestALookupDuringALoadSeesTheEditsMadeDuringIt(t *testing.T) {
	be := newFake(3, "b", "c", "d", "e")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	ctx := context.Background()
	be.gate = make(chan struct{})
	r := c.OpenDir(ctx, "")
	if e, _, err := r.Next(ctx); err != nil || e.Name != "b" {
		t.Fatalf("first page: %+v %v", e, err)
	}
	// Its first page (b, c) is in; b is rewritten, c deleted.
	for _, name := range []string{"b", "c"} {
		if _, ok := r.l.find(name); !ok {
			t.Fatalf("%s is not in the listing loading", name)
		}
	}
	be.put("b", 9, "v2")
	c.Upsert("", Entry{Name: "b", Size: 9, Version: "v2"})
	be.del("c")
	c.Remove("", "c")
	if e, err := c.Lookup(ctx, "", "b"); err != nil || e.Version != "v2" || e.Size != 9 {
		t.Errorf("lookup of the file rewritten during the load: %+v, %v; want v2, 9 bytes", e, err)
	}
	if e, err := c.Lookup(ctx, "", "c"); err == nil {
		t.Errorf("lookup of the file deleted during the load: %+v", e)
	}
	close(be.gate)
	if err := r.l.wait(ctx); err != nil {
		t.Fatal(err)
	}
	waitCurrent(t, c, "")
	if e, err := c.Lookup(ctx, "", "b"); err != nil || e.Version != "v2" {
		t.Errorf("after the load: %+v, %v", e, err)
	}
}

// TestALookupAnsweredAfterAnEditKeepsTheEdit: a lookup of a name asks the
// bucket (HEAD), the name's upload lands (Upsert) before the answer comes
// back, and the answer, older than the edit, was remembered over it: the
// next lookups showed the version before the upload until the TTL ran out.
func TestALookupAnsweredAfterAnEditKeepsTheEdit(t *testing.T) {
	be := newFake(100, "x")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	ctx := context.Background()
	gate := make(chan struct{})
	be.mu.Lock()
	be.statGate = gate
	be.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Lookup(ctx, "", "x")
	}()
	for be.stats.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	be.put("x", 9, "v2")
	c.Upsert("", Entry{Name: "x", Size: 9, Version: "v2"})
	close(gate)
	<-done
	be.mu.Lock()
	be.statGate = nil
	be.mu.Unlock()
	if e, err := c.Lookup(ctx, "", "x"); err != nil || e.Version != "v2" {
		t.Errorf("lookup after the edit: %+v, %v; want v2", e, err)
	}
	if r, ok, err := c.ix.GetStat(c.tag, "x"); err != nil || !ok || r.Version != "v2" {
		t.Errorf("the index holds %+v (%v, %v); want v2", r, ok, err)
	}
}

// TestAReaddirGivesTheNewestEntryOfEachName: a readdir streams the
// listing it opened; a file rewritten here meanwhile (its upload landed:
// Upsert), or written and not yet uploaded (a local entry), or deleted,
// was streamed as the listing had it. READDIRPLUS hands those attributes
// to the kernel with a new inode for the name, and the next stat showed
// the size before the rewrite (a file closed at 458 bytes stat'd at its
// previous 1 MiB, found by TestRandomCallsMatchLocalDisk in --upload
// sync, where close returns as the upload lands, before the listing has
// it).
func TestAReaddirGivesTheNewestEntryOfEachName(t *testing.T) {
	be := newFake(100, "a", "b", "c", "d")
	c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, &testClock{})
	ctx := context.Background()
	readAll(t, c, "")
	waitCurrent(t, c, "")
	r := c.OpenDir(ctx, "")
	be.put("a", 9, "v2")
	c.Upsert("", Entry{Name: "a", Size: 9, Version: "v2"})
	c.SetLocal("", Entry{Name: "b", Size: 5, Version: "local:1", Local: true})
	be.del("c")
	c.Remove("", "c")
	got := map[string]Entry{}
	for {
		e, ok, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got[e.Name] = e
	}
	if e := got["a"]; e.Version != "v2" || e.Size != 9 {
		t.Errorf("a, rewritten since the readdir opened: %+v, want v2, 9 bytes", e)
	}
	if e := got["b"]; !e.Local || e.Size != 5 {
		t.Errorf("b, being written here: %+v, want its local entry", e)
	}
	if e, ok := got["c"]; ok {
		t.Errorf("c, deleted since the readdir opened: %+v", e)
	}
	if _, ok := got["d"]; !ok {
		t.Errorf("d is missing: %v", got)
	}
}
