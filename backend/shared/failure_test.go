package shared

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestTierDownOrSlowNeverFailsOrStallsReads(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(*memStore)
	}{
		{"unavailable", func(s *memStore) { s.down = true }},
		{"slower than the timeout", func(s *memStore) { s.latency = 5 * time.Second }},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := payload(6, 8*bs)
			org := newOrigin(t, map[string][]byte{"k": data})
			store := newMemStore("mem://tier")
			o := testOptions()
			o.BreakerCooldown = time.Hour
			o.ReadOnly = true // failed writes would count too; writer_test covers them
			v := org.version("k")
			store.set(func() { c.spoil(store) })
			tier := newTier(t, org, store, o)
			start := time.Now()
			for i := range 10 {
				got, err := readAll(t, tier.Backend(), "k", v, int64(i%8)*bs, bs, 0)
				if err != nil || !bytes.Equal(got, data[(i%8)*bs:(i%8+1)*bs]) {
					t.Fatalf("read %d: %v", i, err)
				}
			}
			// Three failures open the breaker (each costs at most the
			// timeout); the seven reads after it never touch the tier.
			if el := time.Since(start); el > 3*o.Timeout+time.Second {
				t.Fatalf("10 reads took %s", el)
			}
			s := tier.Stats().Snapshot()
			if s.BreakerTrips != 1 || !s.BreakerOpen || s.Shared.Requests != 3 || s.BypassedBlocks != 7 || s.MissBlocks != 3 {
				t.Fatalf("%+v", s)
			}
		})
	}
}

func TestStalledTierBodyFallsBackWithinTimeout(t *testing.T) {
	data := payload(15, 4*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	a := newTier(t, org, store, o)
	readObject(t, a.Backend(), "k", org.version("k"), 4*bs, 4)
	a.Close()
	store.set(func() { store.stall = true }) // headers come, then nothing
	b := newTier(t, org, store, o)
	start := time.Now()
	if got := readObject(t, b.Backend(), "k", org.version("k"), 4*bs, 4); !bytes.Equal(got, data) {
		t.Fatal("wrong bytes")
	}
	if el := time.Since(start); el > o.Timeout+500*time.Millisecond {
		t.Fatalf("a stalled tier body held the read %s (timeout %s)", el, o.Timeout)
	}
	// The first record stalls and times out; the rest of the read is one
	// origin GET (the other lookups had answered by then).
	if s := b.Stats().Snapshot(); s.Shared.Errors != 1 || s.MissBlocks != 4 || s.Origin.Requests != 1 || s.BadEntries != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestBreakerProbesAndRecovers(t *testing.T) {
	data := payload(7, 2*bs)
	org := newOrigin(t, map[string][]byte{"k": data})
	store := newMemStore("mem://tier")
	o := testOptions()
	o.BreakerCooldown = 100 * time.Millisecond
	v := org.version("k")
	tier := newTier(t, org, store, o)
	tier.MarkDown(errors.New("down at mount"))
	if got, err := readAll(t, tier.Backend(), "k", v, 0, 2*bs, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatal(err)
	}
	if s := tier.Stats().Snapshot(); s.Shared.Requests != 0 || s.BypassedBlocks != 2 {
		t.Fatalf("open breaker let a read through: %+v", s)
	}
	time.Sleep(150 * time.Millisecond)
	if got, err := readAll(t, tier.Backend(), "k", v, 0, 2*bs, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatal(err)
	}
	s := tier.Stats().Snapshot()
	// The probe's read looks up its first group, and the second only if
	// the probe has already closed the breaker when it is launched.
	if s.BreakerOpen || s.Shared.Requests < 1 || s.Shared.Requests > 2 {
		t.Fatalf("probe did not close the breaker: %+v", s)
	}
	// Everything is back: lookups of every group resume.
	if _, err := readAll(t, tier.Backend(), "k", v, 0, 2*bs, 0); err != nil {
		t.Fatal(err)
	}
	if s2 := tier.Stats().Snapshot(); s2.Shared.Requests != s.Shared.Requests+2 {
		t.Fatalf("%+v", s2)
	}
}
