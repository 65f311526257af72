package cache

import (
	"testing"
	"time"
)

// TestRestartTrust: a clean shutdown is trusted (no block re-read at the
// next start); a crash is not: the next run verifies the whole cache in
// the background, drops a block flipped on disk, and its own clean
// shutdown is trusted again. `strata cache verify` (Reverify) checks
// trusted blocks too.
func TestRestartTrust(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(3 * bs)
	key := ObjectKey{Source: "s", Key: "k", Version: "v", Size: int64(len(data))}
	s := openStore(t, dir, testOpts())
	o, _ := s.Acquire(key)
	fill(o, t, data)
	id := o.ID()
	o.Release()
	CloseAsCrash(s)
	flip := func(off int64) { flipByte(t, s.pathOf(id), off) }
	flip(bs + 3) // torn by the crash

	s = openStore(t, dir, testOpts())
	if s.Trusted() {
		t.Fatal("a crash was trusted")
	}
	for deadline := time.Now().Add(10 * time.Second); !s.verifiedAll.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the background verification did not finish")
		}
	}
	o, _ = s.Acquire(key)
	if o.Has(1) || !o.Has(0) || !o.Has(2) {
		t.Fatal("the background verification did not drop exactly the torn block")
	}
	if err := o.WriteBlock(1, data[bs:2*bs]); err != nil { // refetched
		t.Fatal(err)
	}
	o.Release()
	s.Close()

	s = openStore(t, dir, testOpts())
	o, _ = s.Acquire(key)
	if !s.Trusted() || !o.Verified() {
		t.Fatalf("after a verified run's clean shutdown: trusted=%v verified=%v", s.Trusted(), o.Verified())
	}
	flip(2*bs + 1) // bit rot while trusted: only a full verify finds it
	if bad, err := o.Reverify(); bad != 1 || err != nil || o.Has(2) {
		t.Fatalf("Reverify: bad=%d err=%v block 2 present=%v", bad, err, o.Has(2))
	}
	o.Release()
	s.Close()
}
