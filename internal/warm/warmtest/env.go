package warmtest

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stratafs/strata/backend/faults"
	"github.com/stratafs/strata/backend/local"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/prefetch"
)

// Block is the cache block size of an Env.
const Block = 64 << 10

// Env is a source directory with a cache, metadata cache and fetcher
// over it, as a mount or an offline warm builds them.
type Env struct {
	Src   string
	FB    *faults.Backend
	Store *cache.Store
	Fetch *prefetch.Fetcher
	Meta  *meta.Cache
	Sizes map[string]int64
}

// New writes files (name: size) into a fresh source directory and opens a
// cache of cacheBytes over it; opts adjust the cache options.
func New(t *testing.T, files map[string]int, cacheBytes int64, opts ...func(*cache.Options)) *Env {
	t.Helper()
	e := &Env{Src: t.TempDir(), Sizes: map[string]int64{}}
	for k, n := range files {
		p := filepath.Join(e.Src, k)
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
		e.Sizes[k] = int64(n)
	}
	lb, err := local.New(e.Src, local.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e.FB = faults.New(lb, faults.DefaultOptions())
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.BlockSize, so.Engine, so.MaxBytes, so.MinFree = Block, eng, cacheBytes, 0
	for _, o := range opts {
		o(&so)
	}
	if e.Store, err = cache.Open(t.TempDir(), so); err != nil {
		t.Fatal(err)
	}
	po := prefetch.DefaultOptions()
	po.MaxFetches, po.PartBlocks, po.RetryBackoff = 8, 4, time.Millisecond
	e.Fetch = prefetch.New(e.FB, prefetch.NewBudget(32*Block, Block), po)
	e.Meta = meta.New(e.FB, e.Store.Index(), meta.DefaultOptions())
	t.Cleanup(func() { e.Meta.Close(); e.Fetch.Close(); e.Store.Close(); eng.Close() })
	return e
}

// Job is a warm job of req on the env (4 objects at once by default).
func (e *Env) Job(req warm.Request) *warm.Job {
	if req.Concurrency == 0 {
		req.Concurrency = 4
	}
	return &warm.Job{Meta: e.Meta, Store: e.Store, Fetch: e.Fetch, Source: e.FB.String(), Root: "", Req: req}
}

// Cached lists the keys whose every block is in the cache.
func (e *Env) Cached(t *testing.T) []string {
	t.Helper()
	var out []string
	for k, n := range e.Sizes {
		info, err := e.FB.Stat(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		o, err := e.Store.Acquire(cache.ObjectKey{Source: e.FB.String(), Key: k, Version: info.Version, Size: n})
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

// Tree is a source tree of files of several sizes, some in directories.
var Tree = map[string]int{
	"top.txt":          100,
	"empty":            0,
	"d1/a.bin":         3*Block + 5,
	"d1/d2/deep.bin":   Block,
	"train/a0.bin":     10*Block + 1,
	"train/a1.bin":     2 * Block,
	"train/b0.bin":     Block / 2,
	"train/sub/a9.bin": 5 * Block,
}
