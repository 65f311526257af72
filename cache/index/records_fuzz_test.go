package index

import (
	"math"
	"path/filepath"
	"syscall"
	"testing"
)

// FuzzBlockLayout: for any size and block size a record can hold, the
// blocks tile the object exactly: NumBlocks covers it, every block but the
// last is whole, the last is 1..BlockSize bytes, and nothing lies outside
// (no overflow near MaxInt64).
func FuzzBlockLayout(f *testing.F) {
	for _, c := range [][2]int64{{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 4096}, {math.MaxInt64, 1 << 20}, {math.MaxInt64, 1}, {math.MaxInt64 - 1, math.MaxInt64}} {
		f.Add(c[0], c[1], int64(3))
	}
	f.Fuzz(func(t *testing.T, size, bs, probe int64) {
		r := ObjectRecord{Size: size, BlockSize: bs}
		n := r.NumBlocks()
		if size <= 0 || bs <= 0 {
			if n != 0 {
				t.Fatalf("NumBlocks(%d, %d) = %d, want 0", size, bs, n)
			}
			return
		}
		if n <= 0 || n-1 > (size-1)/bs || (n-1)*bs >= size {
			t.Fatalf("NumBlocks(%d, %d) = %d does not cover the object", size, bs, n)
		}
		last := r.BlockLen(n - 1)
		if last <= 0 || last > bs || (n-1)*bs+last != size {
			t.Fatalf("size %d bs %d: last block %d has %d bytes", size, bs, n-1, last)
		}
		for _, i := range []int64{-1, n, n + 1, math.MaxInt64, math.MinInt64, probe} {
			got := r.BlockLen(i)
			switch {
			case i < 0 || i >= n:
				if got != 0 {
					t.Fatalf("size %d bs %d: BlockLen(%d) = %d outside the object", size, bs, i, got)
				}
			case i < n-1:
				if got != bs {
					t.Fatalf("size %d bs %d: inner block %d has %d bytes", size, bs, i, got)
				}
			}
		}
		// A record that decodes round-trips its layout.
		b := MarshalObject(ObjectRecord{Key: "k", Size: size, BlockSize: bs})
		if back, err := UnmarshalObject(b); err != nil || back.NumBlocks() != n {
			t.Fatalf("round trip of size %d bs %d: %+v %v", size, bs, back, err)
		}
	})
}

// FuzzUnmarshalBlock: a block value either decodes to what re-encodes to
// the same 8 bytes, or is ErrCorrupt.
func FuzzUnmarshalBlock(f *testing.F) {
	f.Add(MarshalBlock(BlockInfo{CRC: 0xdeadbeef, Len: 1 << 20}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		bi, err := UnmarshalBlock(b)
		if err != nil {
			if len(b) == 8 {
				t.Fatalf("8 bytes refused: %v", err)
			}
			return
		}
		if got := MarshalBlock(bi); string(got) != string(b) {
			t.Fatalf("re-encode %x -> %x", b, got)
		}
	})
}

// TestMemtablesPreallocated: badger's memtable files, written through
// mmap, have their disk blocks, so that a full disk cannot turn an index
// write into a SIGBUS that kills the mount.
func TestMemtablesPreallocated(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	if len(mems) == 0 {
		t.Fatal("no memtable file")
	}
	for _, p := range mems {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 < st.Size {
			t.Errorf("%s: %d of %d bytes allocated (sparse)", filepath.Base(p), st.Blocks*512, st.Size)
		}
	}
}
