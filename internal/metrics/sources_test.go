package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/prefetch"
)

const blk = 64 << 10

func newStoreFetcher(t *testing.T, be backend.Backend) (*cache.Store, *prefetch.Fetcher) {
	t.Helper()
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.BlockSize, so.Engine, so.MaxBytes, so.MinFree = blk, eng, 1<<30, 0
	store, err := cache.Open(t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	f := prefetch.New(be, prefetch.NewBudget(32*blk, blk), prefetch.DefaultOptions())
	t.Cleanup(func() { f.Close(); store.Close(); eng.Close() })
	return store, f
}

// Counters read at scrape time move with what the read path does: a cold
// read misses and fetches, a second read hits.
func TestScrapeTimeCounters(t *testing.T) {
	const size = 10*blk + 17
	data := strings.Repeat("x", size)
	m := New()
	be := m.WrapBackend(newLocal(t, map[string]string{"obj": data}))
	store, f := newStoreFetcher(t, be)
	m.SetSources(Sources{Fetcher: f, Store: store})

	before := scrape(t, m)
	if v, ok := value(before, "strata_memory_limit_bytes", nil); !ok || v != 32*blk {
		t.Fatalf("memory limit %v (found %v)", v, ok)
	}
	info, err := be.Stat(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Acquire(cache.ObjectKey{Source: be.String(), Key: "obj", Version: info.Version, Size: info.Size})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	read := func() {
		r := f.NewReader(o)
		buf := make([]byte, 1<<20)
		for off := int64(0); off < size; {
			n, err := r.ReadAt(context.Background(), buf, off)
			if err != nil || n == 0 {
				t.Fatalf("read at %d: %d, %v", off, n, err)
			}
			off += int64(n)
		}
	}
	read()
	deadline := time.Now().Add(10 * time.Second)
	for !o.Complete() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cold := scrape(t, m)
	read()
	warm := scrape(t, m)

	tests := []struct {
		name        string
		labels      map[string]string
		cold, delta func(float64) bool
	}{
		// The cold read waited for its blocks (a miss) or found them
		// already fetched by the whole-object fetch its open started (a
		// prefetch hit: a loaded machine): never a cache hit.
		{"strata_cache_misses_total", nil, anyValue, zero},
		{"strata_cache_hits_total", nil, zero, positive},
		{"strata_cache_hit_bytes_total", nil, anyValue, equals(size)},
		{"strata_cache_used_bytes", nil, equals(size), zero},
		{"strata_cache_written_bytes_total", nil, equals(size), zero},
		{"strata_backend_bytes_total", map[string]string{"op": "read", "direction": "received"}, equals(size), zero},
		{"strata_backend_requests_total", map[string]string{"op": "read", "status": "ok"}, positive, zero},
		{"strata_memory_in_use_bytes", nil, equals(0), zero},
		{"strata_memory_peak_bytes", nil, positive, zero},
	}
	for _, tc := range tests {
		c, ok1 := value(cold, tc.name, tc.labels)
		w, ok2 := value(warm, tc.name, tc.labels)
		if !ok1 || !ok2 {
			t.Errorf("%s%v missing", tc.name, tc.labels)
			continue
		}
		if !tc.cold(c) || !tc.delta(w-c) {
			t.Errorf("%s%v: cold %v, warm %v (delta %v)", tc.name, tc.labels, c, w, w-c)
		}
	}
	miss, _ := value(cold, "strata_cache_misses_total", nil)
	pre, _ := value(cold, "strata_cache_prefetch_hits_total", nil)
	if miss+pre == 0 {
		t.Errorf("the cold read counted neither a miss nor a prefetch hit")
	}
	var fetched float64
	for _, p := range []string{"demand", "readahead", "background"} {
		v, _ := value(cold, "strata_prefetch_fetched_bytes_total", map[string]string{"priority": p})
		fetched += v
	}
	if fetched != size {
		t.Errorf("fetched bytes over all priorities = %v, want %d", fetched, size)
	}
	if _, ok := value(cold, "strata_prefetch_window_bytes", nil); !ok {
		t.Error("strata_prefetch_window_bytes missing")
	}

	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range snap {
		if !strings.HasPrefix(s.Name, "strata_") {
			t.Errorf("snapshot has %s", s.Name)
		}
		if s.Name == `strata_backend_requests_total{op="read",status="ok"}` && s.Value > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("snapshot lacks the read requests: %v", snap)
	}
}

func positive(v float64) bool { return v > 0 }
func zero(v float64) bool     { return v == 0 }
func anyValue(float64) bool   { return true }
func equals(want float64) func(float64) bool {
	return func(v float64) bool { return v == want }
}
