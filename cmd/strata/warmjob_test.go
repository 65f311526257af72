package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/faults"
	"github.com/stratafs/strata/backend/local"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/prefetch"
)

const testBlock = 64 << 10

// warmEnv is a source directory with a cache, metadata cache and fetcher
// over it, as a mount or an offline warm builds them.
type warmEnv struct {
	src   string
	fb    *faults.Backend
	store *cache.Store
	fetch *prefetch.Fetcher
	meta  *meta.Cache
	sizes map[string]int64
}

func newWarmEnv(t *testing.T, files map[string]int, cacheBytes int64, opts ...func(*cache.Options)) *warmEnv {
	t.Helper()
	e := &warmEnv{src: t.TempDir(), sizes: map[string]int64{}}
	for k, n := range files {
		p := filepath.Join(e.src, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		e.sizes[k] = int64(n)
	}
	lb, err := local.New(e.src, local.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e.fb = faults.New(lb, faults.DefaultOptions())
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.BlockSize, so.Engine, so.MaxBytes, so.MinFree = testBlock, eng, cacheBytes, 0
	for _, o := range opts {
		o(&so)
	}
	if e.store, err = cache.Open(t.TempDir(), so); err != nil {
		t.Fatal(err)
	}
	po := prefetch.DefaultOptions()
	po.MaxFetches, po.PartBlocks, po.RetryBackoff = 8, 4, time.Millisecond
	e.fetch = prefetch.New(e.fb, prefetch.NewBudget(32*testBlock, testBlock), po)
	e.meta = meta.New(e.fb, e.store.Index(), meta.DefaultOptions())
	t.Cleanup(func() { e.meta.Close(); e.fetch.Close(); e.store.Close(); eng.Close() })
	return e
}

func (e *warmEnv) job(req warmRequest) *warmJob {
	if req.Concurrency == 0 {
		req.Concurrency = 4
	}
	return &warmJob{meta: e.meta, store: e.store, fetch: e.fetch, source: e.fb.String(), root: "", req: req}
}

// cached lists the keys whose every block is in the cache.
func (e *warmEnv) cached(t *testing.T) []string {
	t.Helper()
	var out []string
	for k, n := range e.sizes {
		info, err := e.fb.Stat(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		o, err := e.store.Acquire(cache.ObjectKey{Source: e.fb.String(), Key: k, Version: info.Version, Size: n})
		if err != nil {
			t.Fatal(err)
		}
		if o.Complete() {
			out = append(out, k)
		}
		o.Release()
	}
	sort.Strings(out)
	return out
}

var warmTree = map[string]int{
	"top.txt":          100,
	"empty":            0,
	"d1/a.bin":         3*testBlock + 5,
	"d1/d2/deep.bin":   testBlock,
	"train/a0.bin":     10*testBlock + 1,
	"train/a1.bin":     2 * testBlock,
	"train/b0.bin":     testBlock / 2,
	"train/sub/a9.bin": 5 * testBlock,
}

func TestWarmSelects(t *testing.T) {
	tests := []struct {
		name       string
		req        warmRequest
		want       []string
		wantFailed int64
	}{
		{name: "everything", want: []string{"d1/a.bin", "d1/d2/deep.bin", "empty", "top.txt", "train/a0.bin", "train/a1.bin", "train/b0.bin", "train/sub/a9.bin"}},
		{name: "a directory", req: warmRequest{Prefix: "train/"}, want: []string{"train/a0.bin", "train/a1.bin", "train/b0.bin", "train/sub/a9.bin"}},
		{name: "a key prefix", req: warmRequest{Prefix: "train/a"}, want: []string{"train/a0.bin", "train/a1.bin"}},
		{name: "nothing matches", req: warmRequest{Prefix: "nope/"}},
		{name: "a list", req: warmRequest{Paths: []string{"d1", "/train/b0.bin", "missing.bin"}}, want: []string{"d1/a.bin", "d1/d2/deep.bin", "train/b0.bin"}, wantFailed: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newWarmEnv(t, warmTree, 1<<30)
			var reports int
			p, err := e.job(tc.req).run(context.Background(), func(WarmProgress) { reports++ })
			if (err != nil) != (tc.wantFailed > 0) || p.Failed+p.FailedPaths != tc.wantFailed {
				t.Fatalf("run: failed %d, err %v; want %d failed", p.Failed, err, tc.wantFailed)
			}
			var bytes int64
			for _, k := range tc.want {
				bytes += e.sizes[k]
			}
			if p.Objects != int64(len(tc.want)) || p.Bytes != bytes || p.DoneBytes != bytes || p.Listing || reports == 0 {
				t.Errorf("progress %+v (reports %d), want %d objects, %d bytes", p, reports, len(tc.want), bytes)
			}
			got := e.cached(t)
			// Empty objects are complete whether warmed or not.
			var want []string
			for _, k := range append(tc.want, "empty") {
				if !strings.Contains(strings.Join(want, "\n"), k) {
					want = append(want, k)
				}
			}
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("cached %v, want %v", got, want)
			}
			if tc.wantFailed > 0 && !strings.Contains(err.Error(), "missing.bin") {
				t.Errorf("error does not name the missing path: %v", err)
			}
		})
	}
}

func TestWarmResumes(t *testing.T) {
	e := newWarmEnv(t, warmTree, 1<<30)
	first, err := e.job(warmRequest{Prefix: "train/"}).run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.job(warmRequest{}).run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.Skipped != first.Bytes || all.Fetched() != all.Bytes-first.Bytes {
		t.Fatalf("second warm skipped %d (want %d), fetched %d (want %d)", all.Skipped, first.Bytes, all.Fetched(), all.Bytes-first.Bytes)
	}
	gets := func() (n int64) {
		for p := prefetch.Demand; p <= prefetch.Background; p++ {
			n += e.fetch.Stats().Fetches[p].Load()
		}
		return n
	}
	before := gets()
	again, err := e.job(warmRequest{}).run(context.Background(), nil)
	if err != nil || again.Fetched() != 0 || again.Skipped != again.Bytes {
		t.Fatalf("third warm: %+v, %v", again, err)
	}
	if n := gets() - before; n != 0 {
		t.Fatalf("a warm of a warm cache made %d GETs", n)
	}
}

func TestWarmFailures(t *testing.T) {
	t.Run("an object that cannot be read", func(t *testing.T) {
		e := newWarmEnv(t, warmTree, 1<<30)
		e.fb.SetHook(faults.OpRead, func(_ context.Context, c faults.Call) faults.Fault {
			if c.Key == "train/a1.bin" {
				return faults.Fault{Err: backend.ErrVersionChanged}
			}
			return faults.Fault{}
		})
		j := e.job(warmRequest{})
		j.stall = 200 * time.Millisecond
		p, err := j.run(context.Background(), nil)
		if err == nil || p.Failed != 1 || !strings.Contains(err.Error(), "train/a1.bin") || !strings.Contains(err.Error(), "resume") {
			t.Fatalf("run: %+v, %v; want train/a1.bin failed", p, err)
		}
		if got := len(e.cached(t)); got != len(warmTree)-1 {
			t.Fatalf("%d objects cached, want all but one", got)
		}
	})
	t.Run("the cache is too small", func(t *testing.T) {
		e := newWarmEnv(t, map[string]int{"big.bin": 64 * testBlock}, 8*testBlock)
		j := e.job(warmRequest{})
		j.stall = 200 * time.Millisecond
		p, err := j.run(context.Background(), nil)
		if !errors.Is(err, errCacheFull) || p.Warning == "" {
			t.Fatalf("run: %+v, %v; want the cache-full error and a warning", p, err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		e := newWarmEnv(t, warmTree, 1<<30)
		e.fb.Update(func(o *faults.Options) { o.Latency = 50 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := e.job(warmRequest{}).run(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "cancelled") || time.Since(start) > 5*time.Second {
			t.Fatalf("run after cancel: %v (took %s)", err, time.Since(start))
		}
	})
}
