package prefetch

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestDeliverCachesAndMarks: a delivered block is cached and prefetched:
// its first read is a prefetch hit, not a cache hit, and no GET is made.
func TestDeliverCachesAndMarks(t *testing.T) {
	e := newEnv(t, 16, nil)
	data, o := e.object(t, "small", bs/2)
	if !e.f.Deliver(o, 0, data) || !o.Complete() {
		t.Fatal("Deliver did not cache the block")
	}
	if e.f.Deliver(o, 0, data) {
		t.Fatal("a second Deliver of a present block")
	}
	buf := make([]byte, len(data))
	if n, err := e.f.NewReader(o).ReadAt(context.Background(), buf, 0); err != nil || n != len(data) || !bytes.Equal(buf, data) {
		t.Fatalf("read %d, %v", n, err)
	}
	st := e.f.Stats()
	if st.PrefetchHitOps.Load() != 1 || st.HitOps.Load() != 0 || e.be.gets.Load() != 0 {
		t.Fatalf("prefetch hits %d, hits %d, GETs %d; want 1, 0, 0", st.PrefetchHitOps.Load(), st.HitOps.Load(), e.be.gets.Load())
	}
}

// TestDeliverLeavesAFetchInFlightAlone: while a fetch of the block is in
// flight, Deliver does nothing, so the block is marked once, and the mark
// is gone once a reader read it (a second mark would make the next,
// cached, open a prefetch hit).
func TestDeliverLeavesAFetchInFlightAlone(t *testing.T) {
	e := newEnv(t, 16, nil)
	e.be.latency = 50 * time.Millisecond
	data, o := e.object(t, "small", bs/2)
	if e.f.Prefetch(o) != 1 {
		t.Fatal("nothing scheduled")
	}
	if e.f.Deliver(o, 0, data) {
		t.Fatal("Deliver wrote a block being fetched")
	}
	waitIdle(t, e.f)
	buf := make([]byte, len(data))
	if _, err := e.f.NewReader(o).ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf, data) {
		t.Fatal(err)
	}
	if o.TakeAllPrefetched() {
		t.Fatal("a prefetched mark is left after the block was read")
	}
}
