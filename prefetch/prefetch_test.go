package prefetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/uring"
)

const bs = 64 << 10

type env struct {
	be    *fakeBackend
	store *cache.Store
	f     *Fetcher
}

func newEnv(t *testing.T, budgetBlocks int64, mutate func(*Options)) *env {
	t.Helper()
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.BlockSize = bs
	so.Engine = eng
	so.MaxBytes = 1 << 30
	so.MinFree = 0
	store, err := cache.Open(t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	be := newFake()
	o := DefaultOptions()
	o.InitialWindow = 2 * bs
	o.MaxWindow = 16 * bs
	o.SmallObject = 2 * bs
	o.RetryBackoff = time.Millisecond
	if mutate != nil {
		mutate(&o)
	}
	f := New(be, NewBudget(budgetBlocks*bs, bs), o)
	t.Cleanup(func() { f.Close(); store.Close(); eng.Close() })
	return &env{be: be, store: store, f: f}
}

func (e *env) object(t *testing.T, key string, size int) ([]byte, *cache.Object) {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), uint64(len(key))))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	e.be.put(key, data, "v1")
	o, err := e.store.Acquire(cache.ObjectKey{Source: e.be.String(), Key: key, Version: "v1", Size: int64(size)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Release)
	return data, o
}

func readSeq(t *testing.T, r *Reader, size, chunk int) []byte {
	t.Helper()
	out := make([]byte, 0, size)
	buf := make([]byte, chunk)
	for off := 0; off < size; {
		n, err := r.ReadAt(context.Background(), buf, int64(off))
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if n == 0 {
			t.Fatalf("short read at %d", off)
		}
		out = append(out, buf[:n]...)
		off += n
	}
	return out
}

func TestSequentialReadThenWarm(t *testing.T) {
	e := newEnv(t, 64, nil)
	data, o := e.object(t, "big", 40*bs+123)
	got := readSeq(t, e.f.NewReader(o), len(data), 16<<10)
	if !bytes.Equal(got, data) {
		t.Fatal("cold sequential read returned wrong bytes")
	}
	gets := e.be.gets.Load()
	if gets > 12 { // 41 blocks in 8-block parts, plus a few demand GETs
		t.Errorf("%d GETs for 41 blocks: readahead is not batching", gets)
	}
	waitIdle(t, e.f)
	if !o.Complete() {
		t.Fatal("object not fully cached after a whole read")
	}
	if got := readSeq(t, e.f.NewReader(o), len(data), 1<<20); !bytes.Equal(got, data) || e.be.gets.Load() != gets {
		t.Fatalf("warm read: correct=%v, extra GETs %d", bytes.Equal(got, data), e.be.gets.Load()-gets)
	}
}

func TestSingleFlightUnderConcurrency(t *testing.T) {
	e := newEnv(t, 64, nil)
	e.be.latency = 5 * time.Millisecond
	data, o := e.object(t, "shared", 24*bs)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := readSeq(t, e.f.NewReader(o), len(data), 32<<10); !bytes.Equal(got, data) {
				t.Error("wrong bytes")
			}
		}()
	}
	wg.Wait()
	waitIdle(t, e.f)
	if fetched := e.be.bytes.Load(); fetched != int64(len(data)) {
		t.Fatalf("fetched %d bytes for a %d-byte object read by 16 readers", fetched, len(data))
	}
}

func TestSmallObjectOneGet(t *testing.T) {
	e := newEnv(t, 64, nil)
	data, o := e.object(t, "small", 2*bs-7)
	r := e.f.NewReader(o)
	buf := make([]byte, 4096)
	var got []byte
	for off := 0; off < len(data); off += 4096 {
		n, err := r.ReadAt(context.Background(), buf, int64(off))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, data) || e.be.gets.Load() != 1 {
		t.Fatalf("correct=%v GETs=%d (want 1)", bytes.Equal(got, data), e.be.gets.Load())
	}
}

// TestRandomReadsFetchOnlyWhatIsAsked: random reads of an object larger
// than FillMax fetch the blocks they touch and nothing else.
func TestRandomReadsFetchOnlyWhatIsAsked(t *testing.T) {
	e := newEnv(t, 64, func(o *Options) { o.FillMax = 63 * bs })
	data, o := e.object(t, "tokens", 64*bs)
	r := e.f.NewReader(o)
	rnd := rand.New(rand.NewPCG(1, 2))
	touched := map[int64]bool{}
	buf := make([]byte, 4096)
	for range 20 {
		off := rnd.Int64N(int64(len(data) - 4096))
		touched[off/bs], touched[(off+4095)/bs] = true, true
		if _, err := r.ReadAt(context.Background(), buf, off); err != nil || !bytes.Equal(buf, data[off:off+4096]) {
			t.Fatalf("random read at %d: %v", off, err)
		}
	}
	waitIdle(t, e.f)
	// The first read may look sequential (offset 0 run) and read ahead a
	// little; beyond that only touched blocks are fetched.
	if max := int64(len(touched)+3) * bs; e.be.bytes.Load() > max {
		t.Fatalf("fetched %d bytes for %d touched blocks", e.be.bytes.Load(), len(touched))
	}
}

func TestMemoryBudgetBoundsPrefetch(t *testing.T) {
	const budget = 8
	e := newEnv(t, budget, func(o *Options) { o.MaxFetches = 32 })
	e.be.latency = 2 * time.Millisecond
	var wg sync.WaitGroup
	const readers = 16
	for k := range readers {
		data, o := e.object(t, fmt.Sprintf("obj%d", k), 20*bs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := readSeq(t, e.f.NewReader(o), len(data), 32<<10); !bytes.Equal(got, data) {
				t.Error("wrong bytes under memory pressure")
			}
		}()
	}
	wg.Wait()
	// Demand reads may exceed the budget by one block each, never more.
	if peak := e.f.Budget().Peak(); peak > (budget+readers)*bs {
		t.Fatalf("peak buffers %d bytes, bound %d", peak, (budget+readers)*bs)
	}
	waitIdle(t, e.f)
	if e.f.Budget().InUse() != 0 {
		t.Fatalf("%d bytes of buffers leaked", e.f.Budget().InUse())
	}
}

func TestResumesAfterBodyReset(t *testing.T) {
	e := newEnv(t, 64, nil)
	data, o := e.object(t, "flaky", 20*bs)
	e.be.cutNext.Store(3)
	if got := readSeq(t, e.f.NewReader(o), len(data), 64<<10); !bytes.Equal(got, data) {
		t.Fatal("wrong bytes after resets")
	}
	if e.f.Stats().Retries.Load() == 0 {
		t.Fatal("no retry recorded")
	}
}

func TestVersionChangedAndBackendDown(t *testing.T) {
	e := newEnv(t, 64, nil)
	data, o := e.object(t, "v", 8*bs)
	r := e.f.NewReader(o)
	buf := make([]byte, bs)
	if _, err := r.ReadAt(context.Background(), buf, 0); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, e.f)
	e.be.put("v", data, "v2")
	_, err := r.ReadAt(context.Background(), buf, 7*bs)
	if !o.Has(7) && !errors.Is(err, backend.ErrVersionChanged) {
		t.Fatalf("want ErrVersionChanged, got %v", err)
	}
	e.be.put("v", data, "v1")
	e.be.down.Store(true)
	if _, err := r.ReadAt(context.Background(), buf, 0); err != nil {
		t.Fatalf("cached block with backend down: %v", err)
	}
	// Readahead may have cached any block of v by now: read one of an
	// object nobody has read.
	_, cold := e.object(t, "cold", 8*bs)
	if _, err := e.f.NewReader(cold).ReadAt(context.Background(), buf, 5*bs); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("uncached block with backend down: %v", err)
	}
}

func TestDemandBeatsBackground(t *testing.T) {
	e := newEnv(t, 256, func(o *Options) { o.MaxFetches = 2 })
	e.be.latency = 20 * time.Millisecond
	for k := range 4 {
		_, o := e.object(t, fmt.Sprintf("warm%d", k), 32*bs)
		e.f.Warm(o)
	}
	data, o := e.object(t, "wanted", bs)
	start := time.Now()
	buf := make([]byte, bs)
	if _, err := e.f.NewReader(o).ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf, data) {
		t.Fatal(err)
	}
	// 16 background GETs of 20 ms queue behind 1 slot; demand must not wait for them.
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Fatalf("demand read took %v behind background warming", el)
	}
}

func waitIdle(t *testing.T, f *Fetcher) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		q, running := f.Queued()
		f.mu.Lock()
		n := len(f.inflight) + len(f.filling)
		f.mu.Unlock()
		if running == 0 && q == [numPriorities]int{} && n == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("fetcher did not go idle")
}

func TestBreakerFailsFastWhileDown(t *testing.T) {
	e := newEnv(t, 64, nil)
	e.be.latency = 300 * time.Millisecond // each failing GET costs this much
	_, o := e.object(t, "x", 8*bs)
	e.be.down.Store(true)
	r := e.f.NewReader(o)
	buf := make([]byte, 1024)
	if _, err := r.ReadAt(context.Background(), buf, 0); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("first read: %v", err)
	}
	gets := e.be.gets.Load()
	start := time.Now()
	for i := range 5 {
		if _, err := r.ReadAt(context.Background(), buf, int64(i+2)*bs); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if el := time.Since(start); el > 250*time.Millisecond || e.be.gets.Load() != gets {
		t.Fatalf("reads while down took %v and %d GETs; want fast failures, no GETs", el, e.be.gets.Load()-gets)
	}
	waitIdle(t, e.f)    // readahead sent while down has failed by now
	e.f.health.Expire() // cooldown over: the next fetch probes
	e.be.down.Store(false)
	if _, err := r.ReadAt(context.Background(), buf, 7*bs); err != nil {
		t.Fatalf("read after recovery: %v", err)
	}
}

// A backend that never answers (a black hole: every attempt waits out its
// timeout) fails a demand read within ResponseTimeout as ErrUnavailable,
// and the breaker then fails the next read without a GET.
func TestNoResponseFailsWithinResponseTimeout(t *testing.T) {
	e := newEnv(t, 64, func(o *Options) {
		o.RequestTimeout = 90 * time.Second // the bound without ResponseTimeout
		o.ResponseTimeout = 100 * time.Millisecond
	})
	e.be.latency = time.Hour // answers only when cancelled
	_, o := e.object(t, "hole", 8*bs)
	r := e.f.NewReader(o)
	done := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(context.Background(), make([]byte, 1024), 0)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("read from a backend that never answers: %v (want ErrUnavailable)", err)
		}
	case <-time.After(time.Minute): // far past ResponseTimeout, short of RequestTimeout
		t.Fatal("read from a backend that never answers still waiting after a minute")
	}
	gets := e.be.gets.Load()
	if _, err := r.ReadAt(context.Background(), make([]byte, 1024), 4*bs); !errors.Is(err, backend.ErrUnavailable) || e.be.gets.Load() != gets {
		t.Fatalf("next read: %v after %d more GETs (want ErrUnavailable from the breaker, no GET)", err, e.be.gets.Load()-gets)
	}
}
