package shared

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stratafs/strata/backend"
)

const bs = 4096

// readObject reads a whole object through be the way the fetcher does:
// ReadRange of parts blocks at a time, each block read with one Read.
func readObject(t *testing.T, be backend.Backend, key, version string, size int64, parts int64) []byte {
	t.Helper()
	var out []byte
	for off := int64(0); off < size; off += parts * bs {
		n := min(parts*bs, size-off)
		rc, err := be.ReadRange(context.Background(), key, version, off, n)
		if err != nil {
			t.Fatalf("ReadRange(%s, %d, %d): %v", key, off, n, err)
		}
		for done := int64(0); done < n; {
			buf := make([]byte, min(bs, n-done))
			if _, err := io.ReadFull(rc, buf); err != nil {
				t.Fatalf("read %s at %d: %v", key, off+done, err)
			}
			out = append(out, buf...)
			done += int64(len(buf))
		}
		rc.Close()
	}
	return out
}

func TestSecondNodeReadsFromTier(t *testing.T) {
	for _, c := range []struct {
		name      string
		groupSize int64
		size      int64
		parts     int64
		wantObjs  int
	}{
		{"one block per object", bs, 10*bs + 100, 3, 11},
		{"groups of four", 4 * bs, 10*bs + 100, 3, 3},
		{"groups of four, aligned end", 4 * bs, 10 * bs, 8, 3},
		{"object smaller than a block", 4 * bs, 100, 1, 1},
		{"whole object in one read", 4 * bs, 9 * bs, 9, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := payload(1, int(c.size))
			org := newOrigin(t, map[string][]byte{"d/x": data})
			store := newMemStore("mem://tier")
			o := testOptions()
			o.GroupSize = c.groupSize
			v := org.version("d/x")

			a := newTier(t, org, store, o)
			if got := readObject(t, a.Backend(), "d/x", v, c.size, c.parts); !bytes.Equal(got, data) {
				t.Fatal("node A read wrong bytes")
			}
			a.Close()
			sa := a.Stats().Snapshot()
			if sa.HitBlocks != 0 || sa.MissBytes != c.size || sa.Origin.Bytes != c.size || sa.WritesDropped != 0 {
				t.Fatalf("node A: %+v", sa)
			}
			if got := len(store.keys(o.Prefix + Namespace)); got != c.wantObjs || int(sa.Writes) != c.wantObjs {
				t.Fatalf("tier holds %d objects (%d writes), want %d", got, sa.Writes, c.wantObjs)
			}

			orgGets := org.gets.Load()
			b := newTier(t, org, store, o)
			if got := readObject(t, b.Backend(), "d/x", v, c.size, c.parts); !bytes.Equal(got, data) {
				t.Fatal("node B read wrong bytes")
			}
			sb := b.Stats().Snapshot()
			if org.gets.Load() != orgGets || sb.Origin.Requests != 0 || sb.Origin.Bytes != 0 || sb.MissBlocks != 0 {
				t.Fatalf("node B went to the origin: %d GETs; %+v", org.gets.Load()-orgGets, sb)
			}
			if sb.HitBytes != c.size || sb.BadEntries != 0 || sb.Shared.Errors != 0 {
				t.Fatalf("node B: %+v", sb)
			}
		})
	}
}

func TestSmallReadsAndPartialTierRanges(t *testing.T) {
	data := payload(2, 12*bs+7)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	o.GroupSize = 4 * bs
	v := org.version("k")
	a := newTier(t, org, store, o)
	readObject(t, a.Backend(), "k", v, int64(len(data)), 4)
	a.Close()

	b := newTier(t, org, store, o)
	for _, c := range []struct {
		first, blocks int64
		chunk         int
	}{
		{0, 13, 1000}, {5, 2, 100}, {3, 6, 4096}, {12, 1, 3}, {7, 1, 0}, {1, 11, 5000},
	} {
		off := c.first * bs
		n := min(c.blocks*bs, int64(len(data))-off)
		got, err := readAll(t, b.Backend(), "k", v, off, n, c.chunk)
		if err != nil || !bytes.Equal(got, data[off:off+n]) {
			t.Fatalf("blocks %d+%d in chunks of %d: err %v, equal %v", c.first, c.blocks, c.chunk, err, bytes.Equal(got, data[off:off+n]))
		}
	}
	if s := b.Stats().Snapshot(); s.Origin.Requests != 0 || s.BadEntries != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestMissesCoalesceIntoOneOriginGET(t *testing.T) {
	data := payload(3, 8*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	v := org.version("k")
	// Warm blocks 2 and 5 only (one block per object).
	w := newTier(t, org, store, o)
	for _, b := range []int64{2, 5} {
		if _, err := readAll(t, w.Backend(), "k", v, b*bs, bs, 0); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	r := newTier(t, org, store, o)
	before := org.gets.Load()
	got, err := readAll(t, r.Backend(), "k", v, 0, 8*bs, bs)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("err %v equal %v", err, bytes.Equal(got, data))
	}
	// Misses 0-1, 3-4, 6-7: three origin GETs, one per run.
	if n := org.gets.Load() - before; n != 3 {
		t.Fatalf("%d origin GETs, want 3", n)
	}
	s := r.Stats().Snapshot()
	if s.HitBlocks != 2 || s.MissBlocks != 6 || s.Shared.Requests != 8 {
		t.Fatalf("%+v", s)
	}
}

func TestBadEntriesAreMissesAndRepaired(t *testing.T) {
	for _, groupSize := range []int64{bs, 4 * bs} {
		for _, c := range []struct {
			name  string
			spoil func(store *memStore, victim, other string)
		}{
			{"bit flip", func(s *memStore, v, _ string) { b := s.get(v); b[HeaderSize+10] ^= 1; s.putRaw(v, b) }},
			{"foreign entry", func(s *memStore, v, o string) { s.putRaw(v, s.get(o)) }},
			{"truncated", func(s *memStore, v, _ string) { b := s.get(v); s.putRaw(v, b[:len(b)-1]) }},
			{"garbage", func(s *memStore, v, _ string) { s.putRaw(v, bytes.Repeat([]byte{'x'}, len(s.get(v)))) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				data, other := payload(4, 8*bs), payload(5, 8*bs)
				org := newOrigin(t, map[string][]byte{"k": data, "o": other})
				store := newMemStore("mem://tier")
				o := testOptions()
				o.GroupSize = groupSize
				v := org.version("k")
				a := newTier(t, org, store, o)
				readObject(t, a.Backend(), "k", v, 8*bs, 8)
				readObject(t, a.Backend(), "o", org.version("o"), 8*bs, 8)
				a.Close()
				id, ido := Identity(org.String(), "k", v), Identity(org.String(), "o", org.version("o"))
				victim := a.Keys().Object(id, a.Layout().Group(1))
				c.spoil(store, victim, a.Keys().Object(ido, a.Layout().Group(1)))

				b := newTier(t, org, store, o)
				if got := readObject(t, b.Backend(), "k", v, 8*bs, 8); !bytes.Equal(got, data) {
					t.Fatal("wrong bytes served past a bad entry")
				}
				b.Close()
				s := b.Stats().Snapshot()
				if s.BadEntries != 1 || s.MissBlocks == 0 || s.Shared.Errors != 0 || s.BreakerTrips != 0 {
					t.Fatalf("%+v", s)
				}
				// The entry was rewritten: a third node reads it all from the tier.
				before := org.gets.Load()
				n := newTier(t, org, store, o)
				if got := readObject(t, n.Backend(), "k", v, 8*bs, 8); !bytes.Equal(got, data) {
					t.Fatal("wrong bytes after repair")
				}
				if s := n.Stats().Snapshot(); s.BadEntries != 0 || org.gets.Load() != before {
					t.Fatalf("not repaired: %d origin GETs, %+v", org.gets.Load()-before, s)
				}
			})
		}
	}
}

func TestOriginErrorsPassThrough(t *testing.T) {
	data := payload(8, 2*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	tier := newTier(t, org, newMemStore("mem://tier"), testOptions())
	for _, c := range []struct {
		key, version string
		want         error
	}{
		{"k", "stale-etag", backend.ErrVersionChanged},
		{"missing", "v", backend.ErrNotExist},
	} {
		_, err := tier.Backend().ReadRange(context.Background(), c.key, c.version, 0, bs)
		if !errors.Is(err, c.want) {
			t.Errorf("ReadRange(%s, %s) = %v, want %v", c.key, c.version, err, c.want)
		}
	}
	org.set(func() { org.down = true })
	_, err := tier.Backend().ReadRange(context.Background(), "k", org.version("k"), 0, bs)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("origin down: %v", err)
	}
	if s := tier.Stats().Snapshot(); s.Shared.Errors != 0 || s.BreakerTrips != 0 || s.Origin.Errors != 3 {
		t.Fatalf("origin failures charged to the tier: %+v", s)
	}
}

func TestUnkeyableReadsBypass(t *testing.T) {
	data := payload(9, 3*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	tier := newTier(t, org, store, testOptions())
	for _, c := range []struct {
		version string
		off, n  int64
	}{{"", 0, bs}, {org.version("k"), 100, bs}} {
		got, err := readAll(t, tier.Backend(), "k", c.version, c.off, c.n, 0)
		if err != nil || !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Fatal(err)
		}
	}
	if s := tier.Stats().Snapshot(); s.Shared.Requests != 0 || s.BypassedBlocks != 2 || s.BypassedBytes != 2*bs {
		t.Fatalf("%+v", s)
	}
}

func TestReadOnlyNeverWrites(t *testing.T) {
	data := payload(10, 4*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	o.ReadOnly = true
	tier := newTier(t, org, store, o)
	readObject(t, tier.Backend(), "k", org.version("k"), 4*bs, 2)
	tier.Close()
	if store.puts.Load() != 0 {
		t.Fatalf("%d puts", store.puts.Load())
	}
}

// fullOrigin also copies and deletes.
type fullOrigin struct{ origin }

func (fullOrigin) Copy(context.Context, string, string, string) (backend.ObjectInfo, error) {
	return backend.ObjectInfo{Key: "copied"}, nil
}
func (fullOrigin) Delete(context.Context, string) error { return errors.New("deleted") }

func TestBackendMirrorsOriginAbilities(t *testing.T) {
	org := newOrigin(t, nil)
	for _, c := range []struct {
		name     string
		be       backend.Backend
		w, cp, d bool
	}{
		{"read only", struct{ backend.Backend }{org}, false, false, false},
		{"writer", org, true, false, false},
		{"writer, copier, deleter", fullOrigin{org}, true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := newTier(t, c.be, newMemStore("mem://tier"), testOptions()).Backend()
			w, isW := be.(backend.Writer)
			cp, isC := be.(backend.Copier)
			d, isD := be.(backend.Deleter)
			if _, ok := be.(backend.Closer); !ok || isW != c.w || isC != c.cp || isD != c.d {
				t.Fatalf("writer %v copier %v deleter %v closer %v", isW, isC, isD, ok)
			}
			if be.String() != org.String() {
				t.Fatalf("String() = %q, want the origin's %q", be.String(), org.String())
			}
			if isW {
				if _, err := w.Put(context.Background(), "new", bytes.NewReader([]byte("x")), 1, backend.PutOptions{}); err != nil || org.get("new") == nil {
					t.Fatalf("Put did not reach the origin: %v", err)
				}
			}
			if isC {
				if info, _ := cp.Copy(context.Background(), "a", "", "b"); info.Key != "copied" {
					t.Fatal("Copy did not reach the origin")
				}
			}
			if isD {
				if err := d.Delete(context.Background(), "a"); err == nil || err.Error() != "deleted" {
					t.Fatal("Delete did not reach the origin")
				}
			}
		})
	}
}
