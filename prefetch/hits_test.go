package prefetch

import (
	"bytes"
	"testing"
)

// counts are the hit/miss counters at one moment.
type counts struct{ hitOps, hitBytes, preOps, preBytes, missOps, missBytes int64 }

func snap(f *Fetcher) counts {
	s := f.Stats()
	return counts{s.HitOps.Load(), s.HitBytes.Load(), s.PrefetchHitOps.Load(), s.PrefetchHitBytes.Load(), s.MissOps.Load(), s.MissBytes.Load()}
}

func (c counts) sub(d counts) counts {
	return counts{c.hitOps - d.hitOps, c.hitBytes - d.hitBytes, c.preOps - d.preOps, c.preBytes - d.preBytes, c.missOps - d.missOps, c.missBytes - d.missBytes}
}

// A cold sequential read is served by demand fetches and readahead, none
// of it a cache hit; a second read of the same object is all hits.
func TestHitsExcludeReadahead(t *testing.T) {
	e := newEnv(t, 64, nil)
	data, o := e.object(t, "big", 40*bs+123)
	if got := readSeq(t, e.f.NewReader(o), len(data), 16<<10); !bytes.Equal(got, data) {
		t.Fatal("cold read returned wrong bytes")
	}
	cold := snap(e.f)
	if cold.hitOps != 0 || cold.hitBytes != 0 {
		t.Errorf("cold read counted %d hits (%d bytes); want 0", cold.hitOps, cold.hitBytes)
	}
	if cold.preOps == 0 || cold.missOps == 0 {
		t.Errorf("cold read: %d prefetch hits, %d misses; want both > 0", cold.preOps, cold.missOps)
	}
	if cold.preBytes+cold.missBytes != int64(len(data)) {
		t.Errorf("cold read: %d prefetch + %d miss bytes, want %d", cold.preBytes, cold.missBytes, len(data))
	}
	waitIdle(t, e.f)

	if got := readSeq(t, e.f.NewReader(o), len(data), 16<<10); !bytes.Equal(got, data) {
		t.Fatal("warm read returned wrong bytes")
	}
	warm := snap(e.f).sub(cold)
	if warm.hitBytes != int64(len(data)) || warm.preOps != 0 || warm.missOps != 0 {
		t.Errorf("warm read: %+v; want every byte a hit", warm)
	}
}

// Directory prefetch (Prefetch) is not a hit when read; warming asked for
// (Warm) is. A fully cached object opened through passthrough counts one
// hit of its size, or one prefetch hit while its prefetched blocks are
// unread.
func TestHitsPrefetchVersusWarm(t *testing.T) {
	e := newEnv(t, 64, nil)
	pre, po := e.object(t, "prefetched", 5*bs+7)
	warmed, wo := e.object(t, "warmed", 5*bs+9)
	ptd, pto := e.object(t, "passthrough", 3*bs)
	if e.f.Prefetch(po) == 0 || e.f.Warm(wo) == 0 || e.f.Prefetch(pto) == 0 {
		t.Fatal("nothing scheduled")
	}
	waitIdle(t, e.f)
	if !po.Complete() || !wo.Complete() || !pto.Complete() {
		t.Fatal("objects not cached")
	}

	c0 := snap(e.f)
	if got := readSeq(t, e.f.NewReader(po), len(pre), 16<<10); !bytes.Equal(got, pre) {
		t.Fatal("wrong bytes")
	}
	if d := snap(e.f).sub(c0); d.preBytes != int64(len(pre)) || d.hitOps != 0 || d.missOps != 0 {
		t.Errorf("reading a prefetched object: %+v; want all prefetch hits", d)
	}
	c1 := snap(e.f)
	if got := readSeq(t, e.f.NewReader(po), len(pre), 16<<10); !bytes.Equal(got, pre) {
		t.Fatal("wrong bytes")
	}
	if d := snap(e.f).sub(c1); d.hitBytes != int64(len(pre)) || d.preOps != 0 {
		t.Errorf("reading it again: %+v; want all hits", d)
	}

	c2 := snap(e.f)
	if got := readSeq(t, e.f.NewReader(wo), len(warmed), 16<<10); !bytes.Equal(got, warmed) {
		t.Fatal("wrong bytes")
	}
	if d := snap(e.f).sub(c2); d.hitBytes != int64(len(warmed)) || d.preOps != 0 || d.missOps != 0 {
		t.Errorf("reading a warmed object: %+v; want all hits", d)
	}

	c3 := snap(e.f)
	e.f.CountOpenHit(pto)
	if d := snap(e.f).sub(c3); d != (counts{preOps: 1, preBytes: int64(len(ptd))}) {
		t.Errorf("passthrough open of a prefetched object: %+v; want one prefetch hit of its size", d)
	}
	c4 := snap(e.f)
	e.f.CountOpenHit(pto)
	if d := snap(e.f).sub(c4); d != (counts{hitOps: 1, hitBytes: int64(len(ptd))}) {
		t.Errorf("passthrough open of a cached object: %+v; want one hit of its size", d)
	}
}
