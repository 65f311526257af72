package uring

import (
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type sysFn = func(fd int, p []byte, off int64) (int, error)

// TestPreadFaults injects EINTR and short transfers into the pread
// engine's syscalls: data still lands whole; a write that stops making
// progress or fails midway reports what it did and why.
func TestPreadFaults(t *testing.T) {
	fd, path := openTemp(t, "f")
	e := newPread(DefaultOptions().withDefaults())
	var calls atomic.Int64
	flaky := func(real sysFn) sysFn {
		return func(fd int, p []byte, off int64) (int, error) {
			switch calls.Add(1) % 3 {
			case 0:
				return -1, syscall.EINTR
			case 1:
				p = p[:(len(p)+1)/2] // short transfer
			}
			return real(fd, p, off)
		}
	}
	e.pread, e.pwrite = flaky(unix.Pread), flaky(unix.Pwrite)

	r := rand.New(rand.NewPCG(2, 2))
	var m model
	ops := []Op{
		{Fd: fd, Off: 0, Buf: randBytes(r, 1<<20), Write: true},
		{Fd: fd, Off: 3 << 20, Buf: randBytes(r, 100_001), Write: true},
	}
	e.Do(ops)
	for _, op := range ops {
		if op.Err != nil || op.N != len(op.Buf) {
			t.Fatalf("write: %d %v", op.N, op.Err)
		}
		m.write(op.Off, op.Buf)
	}
	reads := readOps(fd, 3, 1<<20, func(i int) int64 { return int64(i)*(1<<20) + 5 }) // the last crosses EOF
	e.Do(reads)
	checkReads(t, m, reads)
	checkFile(t, path, m)
	if e.st.eintr.Load() == 0 || e.st.resubmits.Load() == 0 {
		t.Errorf("faults not exercised: eintr %d, short %d", e.st.eintr.Load(), e.st.resubmits.Load())
	}

	e.pwrite = func(int, []byte, int64) (int, error) { return 0, nil }
	if n, err := e.WriteAt(fd, []byte("abc"), 0); n != 0 || !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("write without progress: %d %v, want 0 and io.ErrShortWrite", n, err)
	}
	e.pwrite = func(fd int, p []byte, off int64) (int, error) {
		if off == 10 {
			return unix.Pwrite(fd, p[:1], off)
		}
		return -1, syscall.ENOSPC
	}
	if n, err := e.WriteAt(fd, []byte("abc"), 10); n != 1 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write failing midway: %d %v, want 1 and ENOSPC", n, err)
	}
}

// TestPreadParallelism: a batch runs on several goroutines, never more
// than Parallelism.
func TestPreadParallelism(t *testing.T) {
	fd, _ := openTemp(t, "f")
	e := newPread(Options{Parallelism: 3}.withDefaults())
	var now, peak atomic.Int64
	e.pread = func(fd int, p []byte, off int64) (int, error) {
		n := now.Add(1)
		for {
			if old := peak.Load(); n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		now.Add(-1)
		return unix.Pread(fd, p, off)
	}
	e.Do(readOps(fd, 20, 10, func(int) int64 { return 0 }))
	if p := peak.Load(); p < 2 || p > 3 {
		t.Errorf("peak concurrency %d, want 2..3", p)
	}
}
