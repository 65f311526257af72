package cache_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/uring"
)

// The block arithmetic of cached objects: which blocks cover a range,
// what HasRange promises, what ReadAt returns at and past the end, and
// that a flipped byte on disk is caught instead of served.

const fuzzBS = 4096

func openFuzzStore(tb testing.TB, dir string) *cache.Store {
	tb.Helper()
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	o := cache.DefaultOptions()
	o.BlockSize, o.Engine, o.MaxBytes, o.MinFree = fuzzBS, eng, 1<<30, 0
	s, err := cache.Open(dir, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(); eng.Close() })
	return s
}

// pattern is the content of byte i of object seed.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint64(i)*2654435761>>13 ^ seed)
	}
	return b
}

// rangeReads decodes pairs of (offset, length) from b.
func rangeReads(b []byte, size int64) [][2]int64 {
	var out [][2]int64
	for len(b) >= 4 {
		off := int64(binary.LittleEndian.Uint16(b)) * 7 % (size + fuzzBS + 2)
		n := int64(binary.LittleEndian.Uint16(b[2:])) % (3*fuzzBS + 5)
		out = append(out, [2]int64{off, n})
		b = b[4:]
	}
	return out
}

var fuzzKeys atomic.Int64

func FuzzObjectRanges(f *testing.F) {
	f.Add(uint32(3*fuzzBS+100), []byte{0b101}, []byte{0, 0, 0, 16, 1, 0, 255, 255})
	f.Add(uint32(fuzzBS), []byte{1}, []byte{0, 2, 1, 0})
	f.Add(uint32(0), []byte{}, []byte{0, 0, 1, 0})
	f.Add(uint32(1), []byte{1}, []byte{1, 0, 1, 0, 0, 0, 0, 0})
	s := openFuzzStore(f, f.TempDir())
	f.Fuzz(func(t *testing.T, size32 uint32, mask, reads []byte) {
		size := int64(size32 % (40 * fuzzBS))
		seed := uint64(fuzzKeys.Add(1))
		data := pattern(seed, int(size))
		o, err := s.Acquire(cache.ObjectKey{Source: "fuzz://", Key: fmt.Sprint("k", seed), Version: "v", Size: size})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Release()
		if want := (size + fuzzBS - 1) / fuzzBS; o.NumBlocks() != want {
			t.Fatalf("size %d: %d blocks, want %d", size, o.NumBlocks(), want)
		}
		present := func(i int64) bool { return len(mask) > 0 && mask[int(i/8)%len(mask)]>>(i%8)&1 == 1 }
		var total int64
		for i := range o.NumBlocks() {
			total += o.BlockLen(i)
			if present(i) {
				if err := o.WriteBlock(i, data[i*fuzzBS:i*fuzzBS+o.BlockLen(i)]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if total != size || o.BlockLen(o.NumBlocks()) != 0 || o.BlockLen(-1) != 0 {
			t.Fatalf("block lengths sum to %d for %d bytes", total, size)
		}
		for _, r := range rangeReads(reads, size) {
			checkRange(t, o, data, present, r[0], r[1])
		}
	})
}

// checkRange reads [off, off+n) and checks it against data and the blocks
// that were written.
func checkRange(t *testing.T, o *cache.Object, data []byte, present func(int64) bool, off, n int64) {
	t.Helper()
	size := int64(len(data))
	end := min(off+n, size)
	cached := true
	for i := off / fuzzBS; off < end && i <= (end-1)/fuzzBS; i++ {
		cached = cached && present(i)
	}
	if got := o.HasRange(off, n); got != cached {
		t.Fatalf("HasRange(%d, %d) = %v, want %v (size %d)", off, n, got, cached, size)
	}
	p := make([]byte, n)
	got, err := o.ReadAt(p, off)
	switch {
	case off >= size:
		if got != 0 || err != io.EOF {
			t.Fatalf("ReadAt(%d, %d) past the end = %d, %v", off, n, got, err)
		}
	case !cached:
		if err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt(%d, %d) over missing blocks = %d, %v", off, n, got, err)
		}
	default:
		wantErr := error(nil)
		if off+n > size {
			wantErr = io.EOF
		}
		if int64(got) != end-off || err != wantErr || !bytes.Equal(p[:got], data[off:end]) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v (want %d, %v; bytes equal %v)", off, n, got, err, end-off, wantErr, bytes.Equal(p[:got], data[off:end]))
		}
	}
}

// TestFlippedByteDetected: a byte changed on disk behind the cache's back
// is never served: the block fails its CRC on first use after a restart,
// is dropped, and its neighbours still read back.
func TestFlippedByteDetected(t *testing.T) {
	for _, flip := range []int64{0, fuzzBS - 1, fuzzBS, 2*fuzzBS + 17, 3 * fuzzBS} {
		t.Run(fmt.Sprint(flip), func(t *testing.T) {
			dir := t.TempDir()
			data := pattern(9, 3*fuzzBS+100)
			k := cache.ObjectKey{Source: "fuzz://", Key: "flip", Version: "v", Size: int64(len(data))}
			s := openFuzzStore(t, dir)
			o, err := s.Acquire(k)
			if err != nil {
				t.Fatal(err)
			}
			for i := range o.NumBlocks() {
				if err := o.WriteBlock(i, data[i*fuzzBS:i*fuzzBS+o.BlockLen(i)]); err != nil {
					t.Fatal(err)
				}
			}
			o.Release()
			cache.CloseAsCrash(s) // a crash, not a clean shutdown: blocks found are checked
			cache.NoBackgroundVerify(t)

			id := index.IDFor(k.Source, k.Key, k.Version).String()
			p := filepath.Join(dir, "objects", id[:2], id)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[flip] ^= 0x40
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}

			s = openFuzzStore(t, dir)
			o, err = s.Acquire(k)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Release()
			bad := flip / fuzzBS
			buf := make([]byte, len(data))
			if _, err := o.ReadAt(buf, 0); !errors.Is(err, cache.ErrCorrupt) {
				t.Fatalf("read over the flipped byte: %v (want ErrCorrupt)", err)
			}
			if o.Has(bad) {
				t.Fatalf("block %d still present after failing its CRC", bad)
			}
			for i := range o.NumBlocks() {
				if i == bad {
					continue
				}
				blk := make([]byte, o.BlockLen(i))
				if _, err := o.ReadAt(blk, i*fuzzBS); err != nil && err != io.EOF || !bytes.Equal(blk, data[i*fuzzBS:i*fuzzBS+o.BlockLen(i)]) {
					t.Fatalf("intact block %d: %v", i, err)
				}
			}
		})
	}
}

// TestHugeObjectRefused: an object too large to track (a sparse file of
// exabytes in a file:// source) is refused with EFBIG; it used to
// overflow NumBlocks or exhaust memory and kill the mount.
func TestHugeObjectRefused(t *testing.T) {
	s := openFuzzStore(t, t.TempDir())
	tests := []struct {
		size int64
		ok   bool
	}{
		{1 << 30, true},
		{cache.MaxBlocks*fuzzBS + 1, false},
		{1 << 62, false},
		{math.MaxInt64, false},
		{-1, false},
	}
	for _, tc := range tests {
		o, err := s.Acquire(cache.ObjectKey{Source: "fuzz://", Key: fmt.Sprint("huge", tc.size), Version: "v", Size: tc.size})
		if tc.ok {
			if err != nil {
				t.Errorf("size %d: %v", tc.size, err)
				continue
			}
			o.Release()
			continue
		}
		if !errors.Is(err, cache.ErrTooLarge) || !errors.Is(err, syscall.EFBIG) {
			t.Errorf("size %d: %v (want ErrTooLarge, EFBIG)", tc.size, err)
		}
		if o != nil {
			o.Release()
		}
	}
}

type fixedDisk struct{ total, avail int64 }

func (d fixedDisk) Statfs(string) (int64, int64, error) { return d.total, d.avail, nil }

// TestReserveKeptWithCacheSize: a --cache-size larger than the disk does
// not let the cache fill it: room stays for the index (a full disk under
// badger's mmap'd memtable is a SIGBUS). It used to skip statfs entirely.
func TestReserveKeptWithCacheSize(t *testing.T) {
	tests := []struct {
		total, avail, maxBytes int64
		minFree                float64
		want                   int64
	}{
		{100 << 20, 50 << 20, 1 << 30, 0, 40 << 20},  // a tenth of a small disk
		{10 << 30, 1 << 30, 100 << 30, 0, 960 << 20}, // 64 MiB of a big one
		{10 << 30, 5 << 30, 1 << 30, 0, 1 << 30},     // the size limit first
		{10 << 30, 2 << 30, 0, 0.10, 1 << 30},        // the fraction, when larger
		{100 << 20, 5 << 20, 1 << 30, 0, 0},          // less than the reserve left
	}
	for _, tc := range tests {
		eng, _ := uring.New(uring.KindPread, uring.DefaultOptions())
		o := cache.DefaultOptions()
		o.BlockSize, o.Engine, o.MaxBytes, o.MinFree = fuzzBS, eng, tc.maxBytes, tc.minFree
		o.Disk = fixedDisk{tc.total, tc.avail}
		s, err := cache.Open(t.TempDir(), o)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Limit(); got != tc.want {
			t.Errorf("disk %d MiB (%d free), cache-size %d MiB, min-free %v: limit %d MiB, want %d MiB",
				tc.total>>20, tc.avail>>20, tc.maxBytes>>20, tc.minFree, got>>20, tc.want>>20)
		}
		s.Close()
		eng.Close()
	}
}
