package shared

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef-cluster-secret")

func mustSealer(t *testing.T, key []byte) Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reseal rewrites rec's CRC field to match its data: what any writer of
// the tier who knows the format can do after changing the bytes.
func reseal(rec []byte) []byte {
	h, err := DecodeHeader(rec[:HeaderSize])
	if err != nil {
		panic(err)
	}
	h.CRC = Checksum(rec[HeaderSize:])
	h.Encode(rec[:HeaderSize])
	return rec
}

func TestSealerRefusesForgeries(t *testing.T) {
	seal := mustSealer(t, testKey)
	id, other := Identity("s3://b", "k", "etag1"), Identity("s3://b", "k", "etag2")
	l := Layout{BlockSize: 16, GroupBlocks: 4}
	data := []byte("0123456789abcdef")
	good := seal.Append(nil, id, l, 5, data)
	if err := seal.Check(good[:HeaderSize], good[HeaderSize:], id, l, 5); err != nil {
		t.Fatalf("signed record refused: %v", err)
	}
	if h, _ := DecodeHeader(good[:HeaderSize]); !h.Signed || bytes.Contains(good[:HeaderSize], id[:8]) {
		t.Fatalf("signed header %x: not marked signed, or carries the identity", good[:HeaderSize])
	}
	forged := func(err error) bool { return errors.Is(err, ErrForgedRecord) && errors.Is(err, ErrBadRecord) }
	corrupt := func(err error) bool { return errors.Is(err, ErrBadRecord) && !errors.Is(err, ErrForgedRecord) }
	for _, c := range []struct {
		name string
		rec  []byte
		id   ID
		want func(error) bool
	}{
		{"other bytes, CRC recomputed", reseal(append(bytes.Clone(good[:HeaderSize]), "FEDCBA9876543210"...)), id, forged},
		{"entry of another version", seal.Append(nil, other, l, 5, data), id, forged},
		{"unsigned entry with the right identity", AppendRecord(nil, id, l, 5, data), id, forged},
		{"signed with another key", mustSealer(t, []byte("another key of 16+ bytes")).Append(nil, id, l, 5, data), id, forged},
		{"MAC byte flipped", func() []byte { r := bytes.Clone(good); r[40] ^= 1; return r }(), id, forged},
		{"data bit flipped", func() []byte { r := bytes.Clone(good); r[HeaderSize+3] ^= 1; return r }(), id, corrupt},
		{"other block", seal.Append(nil, id, l, 6, data), id, corrupt},
		{"other length", append(seal.Append(nil, id, l, 5, data[:15]), data[15]), id, corrupt},
		{"other layout", seal.Append(nil, id, Layout{BlockSize: 16, GroupBlocks: 2}, 5, data), id, corrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := seal.Check(c.rec[:HeaderSize], c.rec[HeaderSize:], c.id, l, 5)
			if !c.want(err) {
				t.Fatalf("Check = %v", err)
			}
		})
	}
	// A reader without the key refuses signed entries rather than trust
	// their identity field.
	if err := CheckRecord(good[:HeaderSize], good[HeaderSize:], id, l, 5); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("unsigned reader accepted a signed record: %v", err)
	}
}

func TestSealerKeysAndNames(t *testing.T) {
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	if s := mustSealer(t, nil); s.Signed() {
		t.Fatal("no key gave a signing sealer")
	}
	a, b := mustSealer(t, testKey), mustSealer(t, []byte("another key of 16+ bytes"))
	if a.Tag() == b.Tag() || strings.Contains(a.Tag(), string(testKey[:4])) {
		t.Fatalf("tags %q %q", a.Tag(), b.Tag())
	}
	l, id := NewLayout(1<<20, 1<<20), Identity("s3://b", "k", "v")
	names := map[string]bool{}
	for _, s := range []Sealer{{}, a, b} {
		n := NewSignedKeys("p/", "s3://b", l, s).Object(id, 3)
		if strings.Count(n, Namespace) != 1 || !strings.HasPrefix(n, "p/"+Namespace) {
			t.Fatalf("name %q", n)
		}
		if _, gl, g, ok := ParseObject(n); !ok || gl != l || g != 3 {
			t.Fatalf("ParseObject(%q) failed", n)
		}
		names[n] = true
	}
	if len(names) != 3 {
		t.Fatalf("signed and unsigned entries share names: %v", names)
	}
}

// TestSignedTierRefusesForgedEntries: a tier signed with Options.Key serves
// the origin's bytes past each kind of forgery a writer without the key
// can plant, counts it as forged, and rewrites the entry (with groups of
// several blocks, by a repair job that runs even when Close follows at
// once).
func TestSignedTierRefusesForgedEntries(t *testing.T) {
	for _, groupSize := range []int64{bs, 4 * bs} {
		for _, c := range []struct {
			name  string
			forge func(rec []byte, id ID, l Layout, b int64, other []byte) []byte // rec: block b's record
		}{
			{"other bytes, CRC recomputed", func(rec []byte, _ ID, _ Layout, _ int64, _ []byte) []byte {
				copy(rec[HeaderSize:], bytes.Repeat([]byte("FORGED"), len(rec)))
				return reseal(rec)
			}},
			{"another object's signed entry", func(_ []byte, _ ID, _ Layout, _ int64, other []byte) []byte { return other }},
			{"unsigned entry with the right identity", func(rec []byte, id ID, l Layout, b int64, _ []byte) []byte {
				return AppendRecord(nil, id, l, b, bytes.Repeat([]byte{'F'}, len(rec)-HeaderSize))
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				data, otherData := payload(14, 8*bs), payload(15, 8*bs)
				org := newOrigin(t, map[string][]byte{"k": data, "o": otherData})
				store := newMemStore("mem://tier")
				o := testOptions()
				o.GroupSize, o.Key = groupSize, testKey
				v := org.version("k")
				a := newTier(t, org, store, o)
				readObject(t, a.Backend(), "k", v, 8*bs, 8)
				readObject(t, a.Backend(), "o", org.version("o"), 8*bs, 8)
				a.Close()
				l := a.Layout()
				id, ido := Identity(org.String(), "k", v), Identity(org.String(), "o", org.version("o"))
				name := a.Keys().Object(id, l.Group(1))
				obj := store.get(name)
				if obj == nil {
					t.Fatalf("node A wrote no %s", name)
				}
				off := l.RecordOffset(1)
				rec := obj[off : off+l.Stride()]
				otherRec := store.get(a.Keys().Object(ido, l.Group(1)))[off : off+l.Stride()]
				obj = append(append(bytes.Clone(obj[:off]), c.forge(bytes.Clone(rec), id, l, 1, bytes.Clone(otherRec))...), obj[off+l.Stride():]...)
				store.putRaw(name, obj)

				b := newTier(t, org, store, o)
				if got := readObject(t, b.Backend(), "k", v, 8*bs, 8); !bytes.Equal(got, data) {
					t.Fatal("forged bytes served")
				}
				b.Close()
				if s := b.Stats().Snapshot(); s.ForgedEntries != 1 || s.BadEntries != 1 || s.MissBlocks == 0 {
					t.Fatalf("%+v", s)
				}
				before := org.gets.Load()
				n := newTier(t, org, store, o)
				if got := readObject(t, n.Backend(), "k", v, 8*bs, 8); !bytes.Equal(got, data) {
					t.Fatal("wrong bytes after repair")
				}
				if s := n.Stats().Snapshot(); s.BadEntries != 0 || org.gets.Load() != before {
					t.Fatalf("forged entry not rewritten: %d origin GETs, %+v\nnode b: %+v", org.gets.Load()-before, s, b.Stats().Snapshot())
				}
			})
		}
	}
}

// TestSignedAndUnsignedTiersDoNotMix: entries an unsigned tier (or an
// older Strata) wrote are misses for a signed one, not errors; and the
// other way round.
func TestSignedAndUnsignedTiersDoNotMix(t *testing.T) {
	data := payload(16, 4*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	plain, signed := testOptions(), testOptions()
	signed.Key = testKey
	for i, o := range []Options{plain, signed, plain} {
		tier := newTier(t, org, store, o)
		if got := readObject(t, tier.Backend(), "k", org.version("k"), 4*bs, 4); !bytes.Equal(got, data) {
			t.Fatal("wrong bytes")
		}
		tier.Close()
		s := tier.Stats().Snapshot()
		wantHits := int64(0)
		if i == 2 {
			wantHits = 4 // the first unsigned node's entries
		}
		if s.HitBlocks != wantHits || s.BadEntries != 0 {
			t.Fatalf("node %d (signed %v): %+v", i, o.Key != nil, s)
		}
	}
}
