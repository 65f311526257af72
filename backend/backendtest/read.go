package backendtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

func testStat(t *testing.T, h Harness) {
	t.Run("ObjectInfo", func(t *testing.T) {
		b := h.leaf(t)
		for _, size := range []int{0, 1, 1234} {
			key := fmt.Sprintf("s/obj-%d", size)
			info := h.seed(t, b, key, payload(size, 1))
			if info.Key != key || info.Size != int64(size) || info.Version == "" {
				t.Fatalf("Stat(%q) = %+v, want key %q, size %d and a version", key, info, key, size)
			}
			// Loose bound: server clocks may be skewed, but not by a day.
			if d := time.Since(info.MTime); info.MTime.IsZero() || d > 24*time.Hour || d < -24*time.Hour {
				t.Fatalf("Stat(%q).MTime = %v, not near now", key, info.MTime)
			}
			again, err := b.Stat(ctx(t), key)
			if err != nil || again.Version != info.Version {
				t.Fatalf("second Stat(%q) = %+v, %v; version should be stable at %q", key, again, err, info.Version)
			}
		}
	})
	t.Run("NotExist", func(t *testing.T) {
		b := h.leaf(t)
		h.seed(t, b, "s/d/obj", []byte("x"))
		missing := []string{"nope", "s/nope", "s", "s/d", "s/d/obj/x"}
		if !h.Caps.FolderObjects {
			missing = append(missing, "s/", "s/d/")
		}
		for _, key := range missing {
			_, err := b.Stat(ctx(t), key)
			wantErr(t, fmt.Sprintf("Stat(%q)", key), err, backend.ErrNotExist)
		}
	})
}

func testReadRange(t *testing.T, h Harness) {
	const size = 3001
	data := payload(size, 7)
	t.Run("Ranges", func(t *testing.T) {
		b := h.leaf(t)
		info := h.seed(t, b, "r/obj", data)
		ranges := []struct{ off, n int64 }{
			{0, size}, {0, 1}, {1, 1}, {1000, 999}, {size - 1, 1}, {1500, size - 1500}, {100, 0}, {size, 0},
		}
		for _, version := range []string{"", info.Version} {
			for _, r := range ranges {
				mustRead(t, b, "r/obj", version, r.off, data[r.off:r.off+r.n])
			}
		}
	})
	t.Run("EmptyObject", func(t *testing.T) {
		b := h.leaf(t)
		info := h.seed(t, b, "r/empty", nil)
		mustRead(t, b, "r/empty", "", 0, nil)
		mustRead(t, b, "r/empty", info.Version, 0, nil)
	})
	t.Run("NotExist", func(t *testing.T) {
		b := h.leaf(t)
		h.seed(t, b, "r/obj", data)
		for _, key := range []string{"nope", "r/nope", "r"} {
			_, err := read(ctx(t), b, key, "", 0, 1)
			wantErr(t, fmt.Sprintf("ReadRange(%q)", key), err, backend.ErrNotExist)
		}
	})
	t.Run("ShortBodyIsError", func(t *testing.T) {
		// The caller keeps off+n within the object; if it does not, the
		// reader must fail rather than return fewer bytes silently.
		b := h.leaf(t)
		h.seed(t, b, "r/obj", data)
		for _, r := range []struct{ off, n int64 }{{size - 10, 20}, {0, size + 1}, {size + 5, 1}} {
			got, err := read(ctx(t), b, "r/obj", "", r.off, r.n)
			if err == nil {
				t.Fatalf("ReadRange(off %d, n %d) of a %d-byte object returned %d bytes and no error",
					r.off, r.n, size, len(got))
			}
		}
	})
	t.Run("PinnedVersion", func(t *testing.T) {
		b := h.leaf(t)
		old := h.seed(t, b, "r/obj", data)
		mustRead(t, b, "r/obj", old.Version, 0, data)
		newData := payload(size, 8) // same size: only the version can tell
		cur := h.seed(t, b, "r/obj", newData)
		if cur.Version == old.Version {
			t.Fatalf("overwriting r/obj kept version %q", cur.Version)
		}
		for _, r := range []struct{ off, n int64 }{{0, size}, {10, 10}, {size - 1, 1}} {
			got, err := read(ctx(t), b, "r/obj", old.Version, r.off, r.n)
			if err == nil {
				t.Fatalf("ReadRange pinned to the replaced version returned %d bytes and no error", len(got))
			}
			wantErr(t, "ReadRange pinned to the replaced version", err, backend.ErrVersionChanged)
		}
		mustRead(t, b, "r/obj", cur.Version, 0, newData)
		mustRead(t, b, "r/obj", "", 0, newData)
	})
	t.Run("CloseEarly", func(t *testing.T) {
		b := h.leaf(t)
		h.seed(t, b, "r/obj", data)
		for i := 0; i < 3; i++ {
			rc, err := b.ReadRange(ctx(t), "r/obj", "", 0, size)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 10)
			if _, err := rc.Read(buf); err != nil {
				t.Fatal(err)
			}
			if err := rc.Close(); err != nil {
				t.Fatalf("Close after a partial read: %v", err)
			}
		}
		mustRead(t, b, "r/obj", "", 0, data)
	})
	t.Run("Concurrent", func(t *testing.T) {
		b := h.leaf(t)
		big := payload(1<<20, 9)
		info := h.seed(t, b, "r/big", big)
		const goroutines, reads = 64, 6
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 42))
				for i := 0; i < reads; i++ {
					off := rng.Int64N(int64(len(big)))
					n := rng.Int64N(int64(len(big))-off) + 1
					version := ""
					if i%2 == 0 {
						version = info.Version
					}
					got, err := read(ctx(t), b, "r/big", version, off, n)
					if err != nil {
						errs <- fmt.Errorf("goroutine %d: ReadRange(%d, %d): %w", g, off, n, err)
						return
					}
					if !bytes.Equal(got, big[off:off+n]) {
						errs <- fmt.Errorf("goroutine %d: ReadRange(%d, %d) returned wrong bytes", g, off, n)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
