package shared

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestWritesAreBoundedAndNeverSlowReads(t *testing.T) {
	data := payload(11, 10*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	gate := make(chan struct{})
	store.set(func() { store.putGate = gate }) // every PUT hangs until the gate opens
	o := testOptions()
	o.WriteBuffer = 3 * bs
	o.WriteConcurrency = 2
	tier := newTier(t, org, store, o)

	start := time.Now()
	if got := readObject(t, tier.Backend(), "k", org.version("k"), 10*bs, 2); !bytes.Equal(got, data) {
		t.Fatal("wrong bytes")
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("reads waited for the writer: %s", el)
	}
	s := tier.Stats().Snapshot()
	if s.WriteBufferBytes != 3*bs || s.WritesDropped != 7 || s.Writes != 0 {
		t.Fatalf("with PUTs hung: %+v", s)
	}
	close(gate)
	tier.Close()
	s = tier.Stats().Snapshot()
	if s.Writes != 3 || s.WriteBufferBytes != 0 || s.WritesDropped != 7 {
		t.Fatalf("after drain: %+v", s)
	}
}

func TestCloseGivesUpOnAHungTier(t *testing.T) {
	data := payload(12, 4*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	store.set(func() { store.putGate = make(chan struct{}) }) // never opens
	o := testOptions()
	o.DrainTimeout = 100 * time.Millisecond
	tier := newTier(t, org, store, o)
	readObject(t, tier.Backend(), "k", org.version("k"), 4*bs, 4)
	start := time.Now()
	tier.Close()
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Close took %s", el)
	}
	if s := tier.Stats().Snapshot(); s.Writes != 0 || s.WritesDropped != 4 || s.WriteErrors != 0 || s.WriteBufferBytes != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestNoWritesWhileBreakerOpen(t *testing.T) {
	data := payload(13, 4*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	o.BreakerCooldown = time.Hour
	tier := newTier(t, org, store, o)
	tier.MarkDown(errors.New("down"))
	readObject(t, tier.Backend(), "k", org.version("k"), 4*bs, 4)
	tier.Close()
	if s := tier.Stats().Snapshot(); s.Writes != 0 || store.puts.Load() != 0 {
		t.Fatalf("%+v", s)
	}
}

// testWriter is a writer whose assembler is driven by hand (no janitor).
func testAssembler(t *testing.T, groupBlocks int64, size int64) (*Tier, *memStore, origin, []byte) {
	t.Helper()
	data := payload(14, int(size))
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	o.GroupSize = groupBlocks * bs
	o.IdleFlush = time.Hour // sweeps are explicit
	return newTier(t, org, store, o), store, org, data
}

func (t *Tier) addBlock(tb *testing.T, key, version string, data []byte, b int64) {
	tb.Helper()
	end := min((b+1)*t.layout.BlockSize, int64(len(data)))
	buf := t.w.acquire(end - b*t.layout.BlockSize)
	if buf == nil {
		tb.Fatal("no write buffer")
	}
	n := copy(buf, data[b*t.layout.BlockSize:end])
	t.w.add(key, version, Identity(t.source, key, version), b, buf[:n])
}

func TestAssembler(t *testing.T) {
	for _, c := range []struct {
		name      string
		size      int64
		add       []int64
		sweep     bool
		wantPuts  int64
		wantDrops int64
		wantStats int64 // origin Stats (resolve)
	}{
		{"whole group in any order", 8 * bs, []int64{2, 0, 3, 1}, false, 1, 0, 0},
		{"duplicates ignored", 8 * bs, []int64{0, 0, 1, 2, 2, 3}, false, 1, 0, 0},
		{"short last block ends the group", 6*bs + 10, []int64{6, 4, 5}, false, 1, 0, 0},
		{"incomplete group waits", 8 * bs, []int64{0, 1, 2}, false, 0, 0, 0},
		{"aligned end resolved by one stat", 6 * bs, []int64{4, 5}, true, 1, 0, 1},
		{"prefix that is not the end is dropped", 8 * bs, []int64{4, 5}, true, 0, 2, 1},
		{"gap is dropped without a stat", 8 * bs, []int64{0, 2}, true, 0, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tier, store, org, data := testAssembler(t, 4, c.size)
			v := org.version("k")
			for _, b := range c.add {
				tier.addBlock(t, "k", v, data, b)
			}
			if c.sweep {
				for _, j := range tier.w.asm.sweep(false) {
					t.Fatalf("swept a group that was not idle: %+v", j)
				}
				tier.w.asm.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
				for _, j := range tier.w.asm.sweep(false) {
					tier.w.submit(j)
				}
			}
			tier.w.asm.now = time.Now
			// Close sweeps what is left; count before that.
			deadline := time.Now().Add(5 * time.Second)
			for store.puts.Load() < c.wantPuts && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			s := tier.Stats().Snapshot()
			if store.puts.Load() != c.wantPuts || s.WritesDropped != c.wantDrops || org.stats.Load() != c.wantStats {
				t.Fatalf("puts %d drops %d stats %d; want %d %d %d", store.puts.Load(), s.WritesDropped, org.stats.Load(),
					c.wantPuts, c.wantDrops, c.wantStats)
			}
			if c.wantPuts == 1 {
				keys := store.keys(Namespace)
				if len(keys) != 1 {
					t.Fatalf("objects %v", keys)
				}
				g := tier.layout.Group(c.add[0])
				first := tier.layout.FirstBlock(g)
				var want []byte
				id := Identity(tier.source, "k", v)
				for b := first; b < first+4 && b*bs < c.size; b++ {
					want = AppendRecord(want, id, tier.layout, b, data[b*bs:min((b+1)*bs, c.size)])
				}
				if !bytes.Equal(store.get(keys[0]), want) {
					t.Fatal("group object is not the records of its blocks")
				}
			}
		})
	}
}

func TestRecordsReader(t *testing.T) {
	id := Identity("s", "k", "v")
	l := Layout{BlockSize: 8, GroupBlocks: 3}
	blocks := [][]byte{[]byte("abcdefgh"), []byte("ijklmnop"), []byte("qrs")}
	r := newRecordsReader(Sealer{}, id, l, 6, blocks)
	var want []byte
	for i, b := range blocks {
		want = AppendRecord(want, id, l, 6+int64(i), b)
	}
	if r.size != int64(len(want)) {
		t.Fatalf("size %d want %d", r.size, len(want))
	}
	for _, c := range []struct{ off, n int }{{0, len(want)}, {5, 70}, {70, 10}, {len(want) - 3, 3}, {100, 50}} {
		got := make([]byte, c.n)
		k, err := r.ReadAt(got, int64(c.off))
		end := min(c.off+c.n, len(want))
		if k != end-c.off || !bytes.Equal(got[:k], want[c.off:end]) || (err != nil) != (c.off+c.n > len(want)) {
			t.Errorf("ReadAt(%d, %d) = %d, %v", c.off, c.n, k, err)
		}
	}
}

// Small objects take their own size out of the write budget, not a whole
// block's (nor a queue slot sized for one): a budget of 3 blocks holds 48
// objects of a sixteenth of a block.
func TestSmallBlocksTakeTheirOwnSize(t *testing.T) {
	objs := map[string][]byte{}
	for i := range 48 {
		objs[fmt.Sprintf("o%02d", i)] = payload(20+i, int(bs/16))
	}
	org := newOrigin(t, objs)
	store := newMemStore("mem://tier")
	gate := make(chan struct{})
	store.set(func() { store.putGate = gate })
	o := testOptions()
	o.WriteBuffer = 3 * bs
	tier := newTier(t, org, store, o)
	for k, data := range objs {
		if got := readObject(t, tier.Backend(), k, org.version(k), bs/16, 1); !bytes.Equal(got, data) {
			t.Fatal("wrong bytes")
		}
	}
	s := tier.Stats().Snapshot()
	if s.WritesDropped != 0 || s.WriteBufferBytes != 3*bs {
		t.Fatalf("with PUTs hung: %+v", s)
	}
	close(gate)
	tier.Close()
	if s := tier.Stats().Snapshot(); s.Writes != 48 || s.WriteBufferBytes != 0 {
		t.Fatalf("after drain: %+v", s)
	}
}
