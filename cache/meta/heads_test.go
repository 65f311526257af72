package meta

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// headFake is fakeBackend with ReadHead: an object's bytes are its size
// times 'x'.
type headFake struct {
	*fakeBackend
	heads atomic.Int64
}

func (h *headFake) ReadHead(ctx context.Context, key string, n int64) (backend.ObjectInfo, []byte, error) {
	h.heads.Add(1)
	info, err := h.fakeBackend.Stat(ctx, key)
	h.stats.Add(-1) // counted as a head, not a stat
	if err != nil {
		return info, nil, err
	}
	return info, bytes.Repeat([]byte("x"), int(min(n, info.Size))), nil
}

func newHeadCache(t *testing.T, be backend.Backend, headBytes int64) *Cache {
	t.Helper()
	o := DefaultOptions()
	o.HeadBytes = headBytes
	o.ListPrefetch = 0
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)
	return c
}

// TestLookupReadsSmallFilesWhole: a lookup not answered by a listing asks
// with ReadHead instead of a HEAD; a file no bigger than HeadBytes comes
// whole, and TakeHead hands its bytes over once, for that version only.
func TestLookupReadsSmallFilesWhole(t *testing.T) {
	be := &headFake{fakeBackend: newFake(1000)}
	be.put("d/small", 100, "v1")
	be.put("d/big", 5000, "v1")
	be.put("d/other", 10, "v1")
	c := newHeadCache(t, be, 1024)
	ctx := context.Background()
	for _, name := range []string{"small", "big", "other"} {
		if _, err := c.Lookup(ctx, "d/", name); err != nil {
			t.Fatal(name, err)
		}
	}
	if be.heads.Load() != 3 || be.stats.Load() != 0 {
		t.Fatalf("%d ReadHeads and %d HEADs for 3 lookups, want 3 and 0", be.heads.Load(), be.stats.Load())
	}
	if got := c.TakeHead("d/small", "v1"); !bytes.Equal(got, bytes.Repeat([]byte("x"), 100)) {
		t.Fatalf("TakeHead of a small file: %d bytes", len(got))
	}
	if got := c.TakeHead("d/small", "v1"); got != nil {
		t.Fatal("TakeHead gave the same bytes twice")
	}
	if got := c.TakeHead("d/big", "v1"); got != nil {
		t.Fatalf("TakeHead of a file bigger than HeadBytes: %d bytes (only its head was read)", len(got))
	}
	if got := c.TakeHead("d/other", "v2"); got != nil {
		t.Fatal("TakeHead of another version")
	}
}

// hidden is a backend without ReadHead (as GCS and local sources are).
type hidden struct{ backend.Backend }

// TestLookupHeadBytesWithoutReadHead: a backend that has no ReadHead is
// asked with a HEAD, and HeadBytes 0 always sends a HEAD.
func TestLookupHeadBytesWithoutReadHead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		be        func(*headFake) backend.Backend
		headBytes int64
	}{
		{"no ReadHead", func(h *headFake) backend.Backend { return hidden{h} }, 1024},
		{"HeadBytes 0", func(h *headFake) backend.Backend { return h }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &headFake{fakeBackend: newFake(1000)}
			be.put("d/a", 10, "v1")
			be.put("d/b", 10, "v1")
			c := newHeadCache(t, tc.be(be), tc.headBytes)
			for _, name := range []string{"a", "b"} {
				if _, err := c.Lookup(context.Background(), "d/", name); err != nil {
					t.Fatal(err)
				}
			}
			if be.heads.Load() != 0 || be.stats.Load() != 2 || c.TakeHead("d/a", "v1") != nil {
				t.Fatalf("%d ReadHeads, %d HEADs; want 0 and 2", be.heads.Load(), be.stats.Load())
			}
		})
	}
}

// TestHeadsAreBounded: heads nobody takes (lookups of stat calls) do not
// pile up past maxHeadBytes.
func TestHeadsAreBounded(t *testing.T) {
	be := &headFake{fakeBackend: newFake(1000)}
	const size = 1 << 20
	n := maxHeadBytes/size + 8
	for i := range n {
		be.put("d/f"+time.Duration(i).String(), size, "v1")
	}
	c := newHeadCache(t, be, size)
	for i := range n {
		if _, err := c.Lookup(context.Background(), "d/", "f"+time.Duration(i).String()); err != nil {
			t.Fatal(err)
		}
	}
	c.heads.mu.Lock()
	held := c.heads.bytes
	c.heads.mu.Unlock()
	if held > maxHeadBytes {
		t.Fatalf("%d bytes of heads held, bound %d", held, maxHeadBytes)
	}
}

// TestRevalidationSendsAHead: a lookup of a name whose answer expired
// revalidates it with a HEAD: its content, if read, is cached already,
// and reading it again at every TTL would re-download it.
func TestRevalidationSendsAHead(t *testing.T) {
	be := &headFake{fakeBackend: newFake(1000)}
	be.put("d/small", 100, "v1")
	clk := &testClock{}
	clk.ns.Store(int64(1e18))
	o := DefaultOptions()
	o.HeadBytes, o.ListPrefetch, o.TTL, o.Clock = 1024, 0, time.Minute, clk.now
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)
	if _, err := c.Lookup(context.Background(), "d/", "small"); err != nil {
		t.Fatal(err)
	}
	clk.ns.Add(int64(2 * time.Minute))
	if _, err := c.Lookup(context.Background(), "d/", "small"); err != nil {
		t.Fatal(err)
	}
	if be.heads.Load() != 1 || be.stats.Load() != 1 {
		t.Fatalf("%d ReadHeads and %d HEADs for a lookup and its revalidation, want 1 and 1", be.heads.Load(), be.stats.Load())
	}
}
