package prefetch

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/uring"
)

// randomReads reads 4 KiB at n random offsets of o (checking the bytes)
// and returns the blocks the reads touched.
func randomReads(t *testing.T, r *Reader, data []byte, n int, seed uint64) map[int64]bool {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 7))
	touched := map[int64]bool{}
	buf := make([]byte, 4096)
	for range n {
		off := rnd.Int64N(int64(len(data) - 4096))
		touched[off/bs], touched[(off+4095)/bs] = true, true
		if _, err := r.ReadAt(context.Background(), buf, off); err != nil || !bytes.Equal(buf, data[off:off+4096]) {
			t.Fatalf("random read at %d: %v", off, err)
		}
	}
	return touched
}

// TestRandomReadsFillTheObject: after a few random misses, an object up
// to FillMax is fetched whole in the background, each block once, and
// every read after that is served from the cache.
func TestRandomReadsFillTheObject(t *testing.T) {
	e := newEnv(t, 16, func(o *Options) { o.FillMax = 64 * bs })
	e.be.latency = time.Millisecond
	data, o := e.object(t, "table", 64*bs)
	r := e.f.NewReader(o)
	randomReads(t, r, data, 40, 1)
	waitIdle(t, e.f)
	if !o.Complete() {
		t.Fatalf("%d of %d blocks cached after the fill", o.PresentBlocks(), o.NumBlocks())
	}
	if got := e.be.bytes.Load(); got != int64(len(data)) {
		t.Fatalf("fetched %d bytes for a %d-byte object: a block was fetched twice", got, len(data))
	}
	if n := e.f.Stats().Fills.Load(); n != 1 {
		t.Fatalf("%d fills, want 1", n)
	}
	gets := e.be.gets.Load()
	randomReads(t, e.f.NewReader(o), data, 40, 2)
	if e.be.gets.Load() != gets {
		t.Fatalf("%d GETs after the fill", e.be.gets.Load()-gets)
	}
}

// TestFillOff: FillMax 0 turns the fill off.
func TestFillOff(t *testing.T) {
	e := newEnv(t, 64, func(o *Options) { o.FillMax = 0 })
	data, o := e.object(t, "table", 64*bs)
	touched := randomReads(t, e.f.NewReader(o), data, 30, 3)
	waitIdle(t, e.f)
	// Reads that land near the last one look sequential and read ahead a
	// little; nothing near the whole object.
	if max := int64(len(touched)+8) * bs; e.be.bytes.Load() > max || e.f.Stats().Fills.Load() != 0 {
		t.Fatalf("fetched %d bytes for %d touched blocks, %d fills", e.be.bytes.Load(), len(touched), e.f.Stats().Fills.Load())
	}
}

// TestFillStopsOnClose: Close ends a fill that is still fetching.
func TestFillStopsOnClose(t *testing.T) {
	e := newEnv(t, 8, func(o *Options) { o.FillMax = 1 << 30 })
	e.be.latency = 20 * time.Millisecond
	data, o := e.object(t, "slow", 256*bs)
	randomReads(t, e.f.NewReader(o), data, 12, 4)
	e.f.Close()
	if o.Complete() {
		t.Fatal("the fill finished before Close: the test proves nothing")
	}
	e.f.mu.Lock()
	n := len(e.f.filling)
	e.f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d fills still registered after Close", n)
	}
}

// TestFillStopsWhenTheCacheIsFull: a fill stops once the cache refuses
// its blocks, rather than fetching the whole object for nothing.
func TestFillStopsWhenTheCacheIsFull(t *testing.T) {
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.BlockSize = bs
	so.Engine = eng
	so.MaxBytes = 24 * bs
	so.MinFree = 0
	store, err := cache.Open(t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	be := newFake()
	o := DefaultOptions()
	o.FillMax = 1 << 30
	f := New(be, NewBudget(4*bs, bs), o)
	t.Cleanup(func() { f.Close(); store.Close(); eng.Close() })
	e := &env{be: be, store: store, f: f}
	data, obj := e.object(t, "huge", 256*bs)
	randomReads(t, f.NewReader(obj), data, 12, 5)
	waitIdle(t, f)
	if got := be.bytes.Load(); got > 64*bs {
		t.Fatalf("fetched %d blocks of 256 into a cache of 24", got/bs)
	}
	if f.Stats().Fills.Load() != 1 {
		t.Fatal("no fill started: the test proves nothing")
	}
}
