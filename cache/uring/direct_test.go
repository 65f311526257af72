package uring

import (
	"errors"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/internal/testserver"
)

func TestAllocAligned(t *testing.T) {
	pg := uintptr(os.Getpagesize())
	for _, n := range []int{0, 1, 4095, 4096, 12345, 1 << 20} {
		b := AllocAligned(n)
		if len(b) != n || cap(b) != n {
			t.Errorf("AllocAligned(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n > 0 && uintptr(unsafe.Pointer(&b[0]))%pg != 0 {
			t.Errorf("AllocAligned(%d) at %p: not page aligned", n, &b[0])
		}
	}
}

// TestDirectWrites writes an object of three whole 1 MiB blocks and a
// partial tail through an O_DIRECT fd and a buffered fd, as the cache
// fills do, on a real file, with both engines.
func TestDirectWrites(t *testing.T) {
	for _, kind := range []Kind{KindPread, KindUring} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEngine(t, kind, DefaultOptions())
			fd, path := openTemp(t, "obj")
			dfd, err := OpenDirect(path)
			if errors.Is(err, ErrDirectUnsupported) {
				testserver.SkipOrFail(t, "the temp dir's filesystem refuses O_DIRECT: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(dfd)
			if fl, err := unix.FcntlInt(uintptr(dfd), unix.F_GETFL, 0); err != nil || fl&unix.O_DIRECT == 0 {
				t.Fatalf("fd flags %#x, %v: not O_DIRECT", fl, err)
			}
			a, err := DIOAlignFd(dfd)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("DIO alignment: %+v", a)
			if a.Offset < 512 || a.Offset&(a.Offset-1) != 0 || a.Mem < 1 || a.Mem&(a.Mem-1) != 0 {
				t.Fatalf("implausible alignment %+v", a)
			}

			const block, tail = 1 << 20, 12345
			obj := randBytes(rand.New(rand.NewPCG(4, 4)), 3*block+tail)
			var ops []Op
			for off := 0; off < len(obj); off += block {
				b := AllocAligned(min(block, len(obj)-off))
				copy(b, obj[off:])
				ops = AppendWriteOps(ops, dfd, fd, a, b, int64(off))
			}
			unit := max(a.Offset, os.Getpagesize())
			wantFds := []int{dfd, dfd, dfd, dfd, fd} // the tail: its whole pages direct, the rest buffered
			if len(ops) != len(wantFds) || len(ops[3].Buf) != tail/unit*unit || len(ops[4].Buf) != tail%unit {
				t.Fatalf("ops for the tail block: %d ops, direct %d, buffered %d bytes", len(ops), len(ops[3].Buf), len(ops[len(ops)-1].Buf))
			}
			for i, op := range ops {
				if op.Fd != wantFds[i] {
					t.Errorf("op %d (off %d len %d) on fd %d, want %d", i, op.Off, len(op.Buf), op.Fd, wantFds[i])
				}
			}
			e.Do(ops)
			for i, op := range ops {
				if op.Err != nil || op.N != len(op.Buf) {
					t.Fatalf("op %d: %d %v", i, op.N, op.Err)
				}
			}
			checkFile(t, path, obj)

			// The fd really bypasses the page cache: the kernel refuses a
			// misaligned buffer, and the helpers never produce one.
			mis := AllocAligned(2*block + 1)[1 : 1+block]
			if a.Mem > 1 {
				if _, err := e.WriteAt(dfd, mis, 0); !errors.Is(err, syscall.EINVAL) {
					t.Errorf("misaligned O_DIRECT write: %v, want EINVAL", err)
				}
			}
			if k := a.DirectLen(mis, 0); k != 0 {
				t.Errorf("DirectLen of a misaligned buffer = %d", k)
			}
			if ops := AppendWriteOps(nil, dfd, fd, a, mis, 0); len(ops) != 1 || ops[0].Fd != fd {
				t.Errorf("misaligned buffer not routed to the buffered fd: %+v", ops)
			}
			if ops := AppendWriteOps(nil, dfd, fd, a, AllocAligned(block), 512); len(ops) != 1 || ops[0].Fd != fd {
				t.Errorf("misaligned offset not routed to the buffered fd")
			}
		})
	}
}
