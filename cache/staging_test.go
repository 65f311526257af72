package cache

import (
	"errors"
	"testing"
	"time"
)

// With default sizing the tenth of the disk the cache keeps free is not
// withheld from a file being written: staged bytes fit while the disk
// itself keeps its reserve; block writes of the read path still obey the
// limit.
func TestStagingUsesTheFreeTenth(t *testing.T) {
	const mib = 1 << 20
	d := &fakeDisk{}
	d.total.Store(10 << 30)
	d.avail.Store(900 * mib) // under the 1 GiB the cache keeps free
	o := testOpts()
	o.MaxBytes, o.MinFree, o.Disk = 0, 0.10, d
	s := openStore(t, t.TempDir(), o)
	defer s.Close()
	if err := s.ReserveStaging(100 * mib); err != nil {
		t.Fatalf("staging 100 MiB with 900 MiB free: %v", err)
	}
	d.avail.Add(-100 * mib)
	if s.Used() != 100*mib {
		t.Fatalf("used %d, want the staged 100 MiB", s.Used())
	}
	if err := s.ReserveStaging(740 * mib); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("staging 740 MiB with 800 MiB free (64 MiB reserve): %v, want ErrNoSpace", err)
	}
	if err := s.ReserveStaging(700 * mib); err != nil {
		t.Fatalf("staging 700 MiB with 800 MiB free: %v", err)
	}
	if s.reserve(bs) {
		t.Fatal("a block of the read path was cached past the limit")
	}
}

// An explicit --cache-size bounds staged bytes too, whatever the disk has.
func TestStagingKeepsAnExplicitCacheSize(t *testing.T) {
	d := &fakeDisk{}
	d.total.Store(10 << 30)
	d.avail.Store(9 << 30)
	o := testOpts()
	o.MaxBytes, o.MinFree, o.Disk = 64*bs, 0, d
	s := openStore(t, t.TempDir(), o)
	defer s.Close()
	if err := s.ReserveStaging(64 * bs); err != nil {
		t.Fatal(err)
	}
	if err := s.ReserveStaging(1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("staging past --cache-size: %v, want ErrNoSpace", err)
	}
}

// Over the limit with nothing the evictor may take (staged bytes, open
// files), every block the read path cannot cache kicks the evictor: it
// must not scan the whole index for each of them.
func TestEvictorRestsWhenNothingCanBeFreed(t *testing.T) {
	d := &fakeDisk{}
	d.total.Store(10 << 30)
	d.avail.Store(900 << 20)
	o := testOpts()
	o.MaxBytes, o.MinFree, o.Disk = 0, 0.10, d
	s := openStore(t, t.TempDir(), o)
	defer s.Close()
	if err := s.ReserveStaging(100 << 20); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the pass that kick started
	before := s.Stats().EvictionScans.Load()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if s.reserve(bs) {
			t.Fatal("a block was cached past the limit")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if n := s.Stats().EvictionScans.Load() - before; n > 1 {
		t.Fatalf("%d eviction scans in 300 ms of refused blocks, with nothing to evict", n)
	}
}
