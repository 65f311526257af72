package integration

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// lookupFastBound is README's bound for a lookup once the backend is
// known to be gone: "EIO at once (within 1 s)".
const lookupFastBound = time.Second

// TestLookupsWithTheBackendGone: the endpoint refuses connections, never
// answers them, or the bucket is deleted, under a live mount with default flags. The first
// lookup that needs the bucket fails with EIO within README's 10 s; from
// then on a lookup of a name never seen fails within 1 s, names already
// listed answer from the cache, a walk of the whole tree ends, and once
// the bucket is back lookups work again by themselves.
func TestLookupsWithTheBackendGone(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	tp := startToxiproxy(t)
	files := map[string][]byte{"top.txt": []byte("top"), "seen/a.txt": []byte("a")}
	for _, d := range []string{"d1", "d2", "d3", "d4"} {
		files[d+"/x/y/z.txt"] = []byte(d)
	}
	for _, tc := range []struct {
		name       string
		down, back func(t *testing.T, bucket string)
	}{
		{"refused", func(t *testing.T, _ string) { tp.enable(t, "lookups-refused", false) }, func(t *testing.T, _ string) { tp.enable(t, "lookups-refused", true) }},
		// Connections are accepted and never answered (a black hole):
		// before the fix a lookup waited out every attempt's 30 s, 2.5
		// minutes in all, and so did the probe that finds the bucket back.
		{"blackhole", func(t *testing.T, _ string) {
			tp.toxic(t, "lookups-blackhole", "hole-up", "timeout", "upstream", 1, map[string]int64{"timeout": 0})
			tp.toxic(t, "lookups-blackhole", "hole-down", "timeout", "downstream", 1, map[string]int64{"timeout": 0})
		}, func(t *testing.T, _ string) {
			tp.removeToxic(t, "lookups-blackhole", "hole-up")
			tp.removeToxic(t, "lookups-blackhole", "hole-down")
		}},
		{"bucket-deleted", func(t *testing.T, bucket string) {
			if err := srv.m.DeleteBucket(bucket); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, bucket string) {
			if err := srv.m.MakeBucket(bucket); err != nil {
				t.Fatal(err)
			}
			put(t, srv.writer(t, bucket), files)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.newBucket(t)
			put(t, srv.writer(t, bucket), files)
			addr := tp.proxy(t, "lookups-"+tc.name, srv.m.Addr)
			m := startMount(t, srv, srv.source(bucket, ""), "", endpointOf(addr)...)
			if _, err := os.ReadDir(filepath.Join(m.dir, "seen")); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			tc.down(t, bucket)
			_, err := os.Stat(filepath.Join(m.dir, "d1/x/y/z.txt"))
			first := time.Since(start)
			if !errors.Is(err, syscall.EIO) || first > eioBound {
				t.Fatalf("first lookup with the backend gone: %v after %v (want EIO within %v)", err, first, eioBound)
			}
			var slowest time.Duration
			for _, p := range []string{"d2/x/y/z.txt", "d3/x", "d4/x/y/z.txt", "nope"} {
				start := time.Now()
				_, err := os.Stat(filepath.Join(m.dir, p))
				took := time.Since(start)
				slowest = max(slowest, took)
				if !errors.Is(err, syscall.EIO) || took > lookupFastBound {
					t.Errorf("stat %s with the backend known gone: %v after %v (want EIO within %v)", p, err, took, lookupFastBound)
				}
			}
			t.Logf("first lookup: EIO after %v; the next ones: EIO within %v", first.Round(time.Millisecond), slowest.Round(time.Millisecond))
			if b, err := os.ReadFile(filepath.Join(m.dir, "seen/a.txt")); err != nil && !errors.Is(err, syscall.EIO) {
				t.Errorf("a listed name with the backend gone: %q %v (want its entry, and EIO at most for its bytes)", b, err)
			}
			start = time.Now()
			_ = filepath.WalkDir(m.dir, func(string, fs.DirEntry, error) error { return nil }) // ls -laR: errors expected
			walk := time.Since(start)
			if walk > eioBound {
				t.Errorf("a walk of the tree with the backend gone took %v (want it to end within %v)", walk, eioBound)
			}
			tc.back(t, bucket)
			back := time.Now()
			defer func() {
				t.Logf("walk of the tree: %v; lookups back %v after the bucket", walk.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
			}()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				b, err := os.ReadFile(filepath.Join(m.dir, "d2/x/y/z.txt"))
				if err == nil && string(b) == "d2" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("d2/x/y/z.txt 20 s after the backend came back: %v", err)
				}
			}
		})
	}
}
