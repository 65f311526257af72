package cache

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestPreloadAfterACleanShutdown: a mount's store, reopened after a clean
// shutdown, loads the states of the most recently read objects (up to
// IdleObjects), with their cache files open, before anything opens them;
// after a crash it does not (the background verification loads what it
// checks), and without Preload (the offline tools) nothing is loaded.
func TestPreloadAfterACleanShutdown(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{}
	clk.t.Store(1000)
	o := testOpts()
	o.Clock = clk.now
	o.IdleObjects = 2
	s := openStore(t, dir, o)
	for i := range 3 {
		data := randBytes(2 * bs)
		k := ObjectKey{Source: "s", Key: fmt.Sprintf("k%d", i), Version: "v", Size: int64(len(data))}
		obj, err := s.Acquire(k) // read at 1000, 1100, 1200 (k2 the most recent)
		if err != nil {
			t.Fatal(err)
		}
		fill(obj, t, data)
		obj.Release()
		clk.advance(100)
	}
	s.Close()

	loaded := func(s *Store) map[string]bool {
		t.Helper()
		out := map[string]bool{}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range s.states {
			select {
			case <-st.ready: // rec is written by load until then
			default:
				continue
			}
			st.mu.Lock()
			out[st.rec.Key] = st.file != nil
			st.mu.Unlock()
		}
		return out
	}
	// waitLoaded waits for n loaded states with their files open: preload
	// loads a state, then opens its file.
	waitLoaded := func(s *Store, n int) map[string]bool {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got := loaded(s)
			open := 0
			for _, o := range got {
				if o {
					open++
				}
			}
			if open >= n || time.Now().After(deadline) {
				return got
			}
		}
	}

	each := func(s *Store) map[string]bool {
		seen := map[string]bool{}
		s.EachPreloaded(context.Background(), func(o *Object) { seen[o.st.rec.Key] = o.Complete() })
		return seen
	}
	o.Preload = true
	s = openStore(t, dir, o)
	got := waitLoaded(s, 2)
	if len(got) != 2 || !got["k1"] || !got["k2"] {
		t.Errorf("preloaded after a clean shutdown: %v; want k1 and k2 (the two most recent), files open", got)
	}
	if seen := each(s); len(seen) != 2 || !seen["k1"] || !seen["k2"] {
		t.Errorf("EachPreloaded: %v, want k1 and k2, complete", seen)
	}
	s.Close()

	o.Preload = false
	s = openStore(t, dir, o)
	time.Sleep(50 * time.Millisecond)
	if got := loaded(s); len(got) != 0 {
		t.Errorf("without Preload: %v loaded", got)
	}
	CloseAsCrash(s)

	o.Preload = true
	backgroundVerify = false // only preload could load anything now
	defer func() { backgroundVerify = true }()
	s = openStore(t, dir, o)
	time.Sleep(50 * time.Millisecond)
	if got := loaded(s); len(got) != 0 {
		t.Errorf("after a crash: %v preloaded (nothing is trusted)", got)
	}
	if seen := each(s); len(seen) != 0 {
		t.Errorf("EachPreloaded after a crash: %v, want none", seen)
	}
	s.Close()
}
