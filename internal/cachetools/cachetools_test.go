package cachetools_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/internal/warm/warmtest"
)

// warmedCacheDir returns a cache dir (closed, nobody holding it) holding
// every object of warmtest.Tree.
func warmedCacheDir(t *testing.T, opts ...func(*cache.Options)) string {
	t.Helper()
	e := warmtest.New(t, warmtest.Tree, 1<<30, opts...)
	if _, err := e.Job(warm.Request{}).Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	dir := e.Store.Dir()
	e.Meta.Close()
	e.Fetch.Close()
	if err := e.Store.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// flipBlock corrupts the second block of the cache file of the object
// with the most data.
func flipBlock(t *testing.T, dir string) {
	t.Helper()
	var biggest string
	var size int64
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(biggest, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("not the cached bytes"), warmtest.Block+100); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDropsCorruptBlocks(t *testing.T) {
	tests := []struct {
		name    string
		corrupt bool
		bad     int64
	}{
		{name: "clean", corrupt: false, bad: 0},
		{name: "one flipped block", corrupt: true, bad: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := warmedCacheDir(t)
			if tc.corrupt {
				flipBlock(t, dir)
			}
			run := func() cachetools.VerifyProgress {
				store, closeFn, err := cachetools.OfflineStore(dir, "test verify", 1<<62, true, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				defer closeFn()
				p, err := cachetools.Verify(context.Background(), store, 3, nil)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := run()
			if p.BadBlocks != tc.bad || p.BadObjects != tc.bad || int64(len(p.Damaged)) != tc.bad || p.DoneObjects != p.Objects {
				t.Fatalf("verify: %+v, want %d bad blocks", p, tc.bad)
			}
			if tc.bad > 0 && !strings.Contains(p.Damaged[0], "train/a0.bin") {
				t.Errorf("damaged %v, want the biggest object", p.Damaged)
			}
			// The bad block is gone from the index: a second pass is clean
			// and the cache holds one block less.
			again := run()
			if again.BadBlocks != 0 || again.Bytes != p.Bytes-tc.bad*warmtest.Block {
				t.Fatalf("second verify: %+v (first %+v)", again, p)
			}
		})
	}
}

// Verifying offline reads every object; with the frozen clock that must
// not make them all "recently used" (the LRU order is what gc and the
// next mount evict by). Without it, it would.
func TestOfflineVerifyKeepsLRUOrder(t *testing.T) {
	for _, frozen := range []bool{true, false} {
		t.Run(map[bool]string{true: "frozen", false: "control: real clock"}[frozen], func(t *testing.T) {
			old := time.Now().Add(-2 * time.Hour)
			dir := warmedCacheDir(t, func(o *cache.Options) { o.Clock = func() time.Time { return old } })
			store, closeFn, err := cachetools.OfflineStore(dir, "test", 1<<62, frozen, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cachetools.Verify(context.Background(), store, 2, nil); err != nil {
				closeFn()
				t.Fatal(err)
			}
			closeFn() // last-access updates are written by then
			ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			bumped := 0
			err = ix.ScanObjects(func(_ index.ID, rec index.ObjectRecord, err error) error {
				if err == nil && rec.LastAccess > old.Unix()+60 {
					bumped++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if frozen && bumped != 0 {
				t.Fatalf("verify bumped the last access of %d objects", bumped)
			}
			if !frozen && bumped == 0 {
				t.Fatal("control: a real clock bumped nothing; the test cannot see a bump")
			}
		})
	}
}

func TestClear(t *testing.T) {
	t.Run("removes only what strata put there", func(t *testing.T) {
		dir := warmedCacheDir(t)
		for name, text := range map[string]string{"strata.log": "log\n", "notes.txt": "mine\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		n, b, err := cachetools.Clear(dir, false)
		if err != nil || n != int64(len(warmtest.Tree)-1) || b == 0 {
			t.Fatalf("clear: %d objects, %d bytes, %v", n, b, err)
		}
		left, _ := os.ReadDir(dir)
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		if strings.Join(names, ",") != "LOCK,notes.txt,strata.log" {
			t.Fatalf("left %v", names)
		}
	})
	t.Run("refuses while in use", func(t *testing.T) {
		dir := warmedCacheDir(t)
		eng, _ := uring.New(uring.KindPread, uring.DefaultOptions())
		defer eng.Close()
		so := cache.DefaultOptions()
		so.BlockSize, so.Engine, so.Owner = warmtest.Block, eng, "mount /mnt/busy"
		st, err := cache.Open(dir, so)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		_, _, err = cachetools.Clear(dir, false)
		if !errors.Is(err, cachetools.ErrInUse) || !strings.Contains(err.Error(), "mount /mnt/busy") {
			t.Fatalf("clear of a held dir: %v", err)
		}
	})
	t.Run("refuses to drop staged writes unless forced", func(t *testing.T) {
		dir := warmedCacheDir(t)
		if err := os.WriteFile(filepath.Join(dir, "staging", "ckpt"), []byte("not uploaded"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := cachetools.Clear(dir, false); err == nil || !strings.Contains(err.Error(), "not yet uploaded") {
			t.Fatalf("clear with staged files: %v", err)
		}
		if _, _, err := cachetools.Clear(dir, true); err != nil {
			t.Fatalf("clear --force: %v", err)
		}
	})
	t.Run("not a cache dir", func(t *testing.T) {
		if _, _, err := cachetools.Clear(t.TempDir(), false); err == nil {
			t.Fatal("cleared a directory that holds no cache")
		}
	})
}

func TestGCAppliesTheLimit(t *testing.T) {
	dir := warmedCacheDir(t)
	var total int64
	for _, n := range warmtest.Tree {
		total += int64(n)
	}
	limit := total / 2
	store, closeFn, err := cachetools.OfflineStore(dir, "test gc", limit, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	res := cachetools.SettleEviction(store)
	if res.UsedBytes > limit || res.FreedBytes <= 0 || res.UsedBytes+res.FreedBytes != total || res.LimitBytes != limit {
		t.Fatalf("gc: %+v (total %d, limit %d)", res, total, limit)
	}
}

func TestHistoryKeepsTheLast(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		s := cachetools.Session{PID: i, HitBytes: int64(i), Started: time.Unix(int64(i), 0)}
		if err := cachetools.AppendHistory(dir, s, 3); err != nil {
			t.Fatal(err)
		}
	}
	h := cachetools.ReadHistory(dir)
	if len(h) != 3 || h[0].PID != 2 || h[2].PID != 4 {
		t.Fatalf("history %+v", h)
	}
	if r, total := cachetools.HitRatio(cachetools.Session{HitBytes: 3, MissBytes: 1}); r != 0.75 || total != 4 {
		t.Fatalf("hitRatio = %v of %d", r, total)
	}
	// Prefetched bytes came from the origin: in the total, not hits.
	if r, total := cachetools.HitRatio(cachetools.Session{HitBytes: 2, PrefetchHitBytes: 1, MissBytes: 1}); r != 0.5 || total != 4 {
		t.Fatalf("hitRatio with prefetch hits = %v of %d", r, total)
	}
}
