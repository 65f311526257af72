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

// autoKind is what KindAuto resolves to, from the benchmarks in
// bench_test.go on the cache's workload (`go test -bench . -run '^$'
// ./cache/uring/`, Linux 6.18, 2 vCPU EPYC VM, ext4 on virtio, GOMAXPROCS=2;
// MB/s, pread vs uring, uring/pread ratio):
//
//	TODO(bench): fill in measured numbers.
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
