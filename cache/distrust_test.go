package cache

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDistrustChecksEveryBlockAgain: a cache file written behind the
// cache's back (a mapping of a passthrough backing file) is distrusted:
// the object no longer counts as verified, and the next Verify finds and
// drops the changed block, keeping the others.
func TestDistrustChecksEveryBlockAgain(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(3 * bs)
	key := ObjectKey{Source: "s3://b", Key: "w.bin", Version: "v1", Size: int64(len(data))}
	s := openStore(t, dir, testOpts())
	defer s.Close()
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	fill(o, t, data)
	if !o.Verified() {
		t.Fatal("a written object is not verified")
	}

	fd, err := o.Fd()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(fd, []byte("stored through a mapping"), bs+10); err != nil {
		t.Fatal(err)
	}
	o.Distrust()
	if o.Verified() {
		t.Fatal("a distrusted object still counts as verified")
	}
	bad, err := o.Verify()
	if err != nil || bad != 1 {
		t.Fatalf("Verify after Distrust: %d bad blocks, %v; want 1", bad, err)
	}
	if !o.Has(0) || o.Has(1) || !o.Has(2) {
		t.Fatalf("blocks present after Verify: %v %v %v; want the changed one dropped only", o.Has(0), o.Has(1), o.Has(2))
	}
}
