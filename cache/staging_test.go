package cache

import (
	"errors"
	"testing"
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
