package uring

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"syscall"
)

// ErrClosed is the error of any call on an engine after Close.
var ErrClosed = errors.New("engine closed")

// ErrBadKind: New was given a Kind that ParseKind would reject.
var ErrBadKind = errors.New("unknown io engine")

// Options configures New. The zero value of a field means its default.
type Options struct {
	// Entries is the io_uring submission queue size. The kernel rounds it
	// up to a power of two and clamps it; the completion queue is twice
	// as big and bounds the ops in flight per engine (no CQ overflow).
	Entries int
	// Rings is how many io_uring instances the uring engine spreads calls
	// over: one ring copies on one thread at a time. Default GOMAXPROCS,
	// at most 8.
	Rings int
	// Parallelism bounds the goroutines (and so the blocked OS threads)
	// one Do of the pread engine uses; it is the queue depth a batch gets.
	Parallelism int

	// Test knobs, zero in production.
	maxChunk int // cap on bytes per SQE or pread call (forces short-I/O paths)
	slots    int // ops in flight per ring; > CQ size provokes CQ overflow
}

// DefaultOptions: one 256-entry ring (512 ops in flight) per CPU, up to
// 8; batches of up to 16 concurrent preads.
func DefaultOptions() Options {
	return Options{Entries: 256, Rings: min(runtime.GOMAXPROCS(0), 8), Parallelism: 16}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Entries <= 0 {
		o.Entries = d.Entries
	}
	o.Entries = min(o.Entries, 32768) // IORING_MAX_ENTRIES
	if o.Rings <= 0 {
		o.Rings = d.Rings
	}
	if o.Parallelism <= 0 {
		o.Parallelism = d.Parallelism
	}
	if o.maxChunk <= 0 || o.maxChunk > maxRW {
		o.maxChunk = maxRW
	}
	return o
}

// autoKind is what KindAuto resolves to: pread, which the benchmarks in
// bench_test.go show as fast or faster on every case of the cache's
// workload. Measured with `go test -bench . -count=5 -run '^$'
// ./cache/uring/` on Linux 6.18, 2 vCPU Xeon VM, ext4 on virtio, Go 1.26,
// GOMAXPROCS=2, other jobs sharing the VM; medians of 5 runs, uring with
// 2 rings; u/p is the uring/pread ratio of ops/s, [its range over runs]:
//
//	case                        pread MB/s  uring MB/s   u/p
//	ColdFill/buffered/batch=1         3711        2940   0.79 [0.43-4.32] (noisy: page cache, shared VM)
//	ColdFill/buffered/batch=8         4815        3489   0.72 [0.24-1.05]
//	ColdFill/buffered/batch=32        3091        2892   0.94 [0.32-1.25]
//	ColdFill/direct/batch=1           1989        1792   0.90 [0.85-0.97]
//	ColdFill/direct/batch=8           1864        1703   0.91 [0.57-1.01]
//	ColdFill/direct/batch=32          1365        1319   0.97 [0.79-1.02]
//	WarmRead/4KiB/qd1                 5264        3528   0.67 [0.64-0.73]
//	WarmRead/4KiB/batch32             3550        5343   1.50 [1.37-1.54]
//	WarmRead/4KiB/par16               8183        5010   0.61 [0.54-0.65]
//	WarmRead/128KiB/qd1               8979        8515   0.95 [0.91-0.99]
//	WarmRead/128KiB/batch32          12683        8255   0.65 [0.62-0.69]
//	WarmRead/128KiB/par16            16520       11285   0.68 [0.61-0.80]
//	WarmRead/1024KiB/qd1              8878        8709   0.98 [0.95-1.02]
//	WarmRead/1024KiB/batch32         10440        7617   0.73 [0.50-0.98]
//	WarmRead/1024KiB/par16           16210       12078   0.75 [0.46-0.78]
//
// io_uring wins only batches of small reads in one Do (1.5x at 4 KiB x 32),
// which the cache does not issue: FUSE reads arrive one per request. Its
// kernel path costs more per op (4 KiB QD1: ~1.1 us vs ~0.75 us for
// pread), and page-cache copies run on the submitting thread under a
// per-ring lock, where pread spreads them over threads. Re-measure on
// NVMe with many cores before changing this.
const autoKind = KindPread

// New returns an engine of the given kind. KindUring fails with an error
// matching ErrUnavailable when the kernel or its policy refuses io_uring;
// KindAuto never does: it falls back to pread.
func New(kind Kind, opts Options) (Engine, error) {
	opts = opts.withDefaults()
	switch kind {
	case KindPread:
		return newPread(opts), nil
	case KindUring:
		e, err := newUring(opts)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return e, nil
	case KindAuto:
		if autoKind == KindUring {
			e, err := newUring(opts)
			if err == nil {
				return e, nil
			}
			if !errors.Is(err, ErrUnavailable) {
				return nil, err
			}
		}
		return newPread(opts), nil
	}
	return nil, fmt.Errorf("uring: new %q: %w", kind, ErrBadKind)
}

// opError wraps a failure of one op in the house format.
func opError(op *Op, err error) error {
	name := "read"
	if op.Write {
		name = "write"
	}
	return fmt.Errorf("uring: %s fd %d off %d: %w", name, op.Fd, op.Off, err)
}

// validate rejects what the kernel would misread: a negative offset (-1
// means "the file position" to io_uring) and an fd that does not fit the
// kernel's 32-bit fd (pread would silently use its low bits).
func validate(op *Op) error {
	switch {
	case op.Off < 0:
		return opError(op, syscall.EINVAL)
	case op.Fd > math.MaxInt32:
		return opError(op, syscall.EBADF)
	}
	return nil
}

// closedError is what ops and calls get after Close.
func closedError(op *Op) error { return opError(op, ErrClosed) }

// errCloseTwice is what a second Close returns.
var errCloseTwice = fmt.Errorf("uring: close: %w", ErrClosed)

// stats counts the rare paths, for tests and debugging.
type stats struct {
	eintr     atomic.Int64 // io_uring_enter or pread returned EINTR and was retried
	enters    atomic.Int64 // successful submitting io_uring_enter calls
	waits     atomic.Int64 // blocking waits for completions by the reaper
	busy      atomic.Int64 // EAGAIN/EBUSY from submission, retried
	overflows atomic.Int64 // CQ overflow flushes
	resubmits atomic.Int64 // short transfers and retryable CQE errors resubmitted
}
