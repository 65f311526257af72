package uring

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one io_uring instance: the fd, the three mappings and typed views
// into them. It knows the ring protocol, not the engine's bookkeeping.
//
// Concurrency: the SQ side (sqLocal, SQE slots, the tail) belongs to whoever
// holds the engine's sqMu; the CQ side (the head) to whoever holds cqMu.
// Kernel-shared indices are read and written with sync/atomic, which is
// sequentially consistent and so covers every acquire/release pairing the
// kernel asks for (notes §4.3).
type ring struct {
	fd int
	p  params

	// The mappings, each unmapped once by close. cqMem is nil under
	// IORING_FEAT_SINGLE_MMAP, where the CQ ring lives in sqMem.
	sqMem, cqMem, sqeMem []byte

	sqHead, sqTail, sqFlags *uint32
	sqMask, sqEntries       uint32
	sqes                    []sqe
	sqLocal                 uint32 // next SQE to fill; published as the tail by flush

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe
}

// unavailable wraps a setup failure so callers can fall back with errors.Is.
func unavailable(why string, err error) error {
	if err == nil {
		return fmt.Errorf("uring: setup: %w: %s", ErrUnavailable, why)
	}
	return fmt.Errorf("uring: setup: %w: %s: %w", ErrUnavailable, why, err)
}

// setupReason explains an io_uring_setup errno in operator terms.
func setupReason(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return "kernel without io_uring, or the syscall is filtered"
	case errors.Is(err, syscall.EPERM):
		b, _ := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
		switch strings.TrimSpace(string(b)) {
		case "2":
			return "disabled by sysctl kernel.io_uring_disabled=2"
		case "1":
			return "sysctl kernel.io_uring_disabled=1 and this process is not in kernel.io_uring_group"
		}
		return "denied by a seccomp profile or LSM"
	case errors.Is(err, syscall.ENOMEM):
		return "no memory for the rings (RLIMIT_MEMLOCK on kernels before 5.12)"
	}
	return "io_uring_setup failed"
}

// openRing creates a ring of at least entries SQEs (clamped by the kernel)
// and maps it. Any failure is ErrUnavailable: the caller can use pread.
func openRing(entries uint32) (*ring, error) {
	var p params
	p.Flags = setupClamp | setupSubmitAll
	fd, err := sysSetup(entries, &p)
	if errors.Is(err, syscall.EINVAL) { // SUBMIT_ALL is 5.18+; retry without it
		p = params{Flags: setupClamp}
		fd, err = sysSetup(entries, &p)
	}
	if err != nil {
		return nil, unavailable(setupReason(err), err)
	}
	if p.Features&featNoDrop == 0 {
		unix.Close(fd)
		return nil, unavailable("kernel lacks IORING_FEAT_NODROP (Linux < 5.5)", nil)
	}
	if err := probeRW(fd); err != nil {
		unix.Close(fd)
		return nil, unavailable("kernel lacks IORING_OP_READ/WRITE (Linux < 5.6)", err)
	}
	r := &ring{fd: fd, p: p}
	if err := r.mmap(); err != nil {
		r.close()
		return nil, unavailable("mmap of the rings failed", err)
	}
	return r, nil
}

func (r *ring) mmap() error {
	p := &r.p
	sqSize := int(p.SqOff.Array + p.SqEntries*4)
	cqSize := int(p.CqOff.Cqes + p.CqEntries*uint32(unsafe.Sizeof(cqe{})))
	single := p.Features&featSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize) // one mapping serves both rings
	}
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return err
	}
	cqMem := r.sqMem
	if !single {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
			r.cqMem = nil
			return err
		}
		cqMem = r.cqMem
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.SqEntries)*int(unsafe.Sizeof(sqe{})), prot, flags); err != nil {
		return err
	}

	r.sqHead = u32At(r.sqMem, p.SqOff.Head)
	r.sqTail = u32At(r.sqMem, p.SqOff.Tail)
	r.sqFlags = u32At(r.sqMem, p.SqOff.Flags)
	r.sqMask = *u32At(r.sqMem, p.SqOff.RingMask)
	r.sqEntries = *u32At(r.sqMem, p.SqOff.RingEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.SqEntries)
	// SQ array slot i always names SQE i, so the SQ is a plain ring of SQEs.
	// These plain stores are published by the first (atomic) tail store.
	array := unsafe.Slice(u32At(r.sqMem, p.SqOff.Array), p.SqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqLocal = atomic.LoadUint32(r.sqTail)

	r.cqHead = u32At(cqMem, p.CqOff.Head)
	r.cqTail = u32At(cqMem, p.CqOff.Tail)
	r.cqMask = *u32At(cqMem, p.CqOff.RingMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&cqMem[p.CqOff.Cqes])), p.CqEntries)
	return nil
}

func u32At(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

// close unmaps the rings and closes the fd. The kernel cancels and reaps
// anything still in flight when the last reference to the ring goes, but
// the engine only calls close with nothing in flight.
func (r *ring) close() error {
	var errs []error
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	r.sqeMem, r.cqMem, r.sqMem, r.sqes, r.cqes = nil, nil, nil, nil, nil
	errs = append(errs, unix.Close(r.fd))
	r.fd = -1
	return errors.Join(errs...)
}

// sqFull reports whether every SQE slot is filled and not yet consumed.
// Caller holds sqMu.
func (r *ring) sqFull() bool { return r.sqLocal-atomic.LoadUint32(r.sqHead) >= r.sqEntries }

// nextSQE returns the next free SQE, zeroed. Caller holds sqMu and has
// checked sqFull.
func (r *ring) nextSQE() *sqe {
	s := &r.sqes[r.sqLocal&r.sqMask]
	*s = sqe{}
	r.sqLocal++
	return s
}

// flush publishes the filled SQEs and enters the kernel until it has
// consumed all of them. EINTR is retried; EAGAIN and EBUSY (kernel short of
// memory, or a CQ overflow backlog) are retried after flushing the overflow
// and a short sleep, for about a second. On a hard error the unconsumed
// SQEs are taken back out of the ring (the kernel has not seen them: it
// only reads the SQ inside io_uring_enter) and their user_data returned
// with the error, for the caller to fail. Caller holds sqMu.
func (r *ring) flush(st *stats) (refused []uint64, err error) {
	busy := 0
	for {
		head := atomic.LoadUint32(r.sqHead)
		n := r.sqLocal - head
		if n == 0 {
			return nil, nil
		}
		atomic.StoreUint32(r.sqTail, r.sqLocal) // release: SQE stores before the tail
		got, err := sysEnter(r.fd, n, 0, 0)
		switch {
		case errors.Is(err, syscall.EINTR):
			st.eintr.Add(1)
			continue
		case err == nil && got > 0:
			st.enters.Add(1)
			continue // re-read the head: the rest goes in the next round
		case err == nil || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EBUSY):
			if busy++; busy < 20000 {
				st.busy.Add(1)
				r.flushOverflow(st)
				time.Sleep(50 * time.Microsecond)
				continue
			}
			if err == nil {
				err = syscall.EAGAIN
			}
		}
		for i := head; i != r.sqLocal; i++ {
			refused = append(refused, r.sqes[i&r.sqMask].UserData)
		}
		r.sqLocal = head
		atomic.StoreUint32(r.sqTail, head)
		return refused, err
	}
}

// reapCQ copies up to len(dst) CQEs out of the ring and frees their slots.
// Caller holds cqMu.
func (r *ring) reapCQ(dst []cqe) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail) // acquire: CQE stores before the tail
	n := 0
	for head != tail && n < len(dst) { // != not <: the indices wrap
		dst[n] = r.cqes[head&r.cqMask]
		n++
		head++
	}
	if n > 0 {
		atomic.StoreUint32(r.cqHead, head) // release: copied out before reuse
	}
	return n
}

// overflowed reports CQEs parked in the kernel's overflow list (NODROP).
func (r *ring) overflowed() bool { return atomic.LoadUint32(r.sqFlags)&sqCQOverflow != 0 }

// flushOverflow asks the kernel to move overflowed CQEs into the ring;
// GETEVENTS with min_complete 0 does that without blocking.
func (r *ring) flushOverflow(st *stats) {
	for {
		_, err := sysEnter(r.fd, 0, 0, enterGetEvents)
		if !errors.Is(err, syscall.EINTR) {
			st.overflows.Add(1)
			return
		}
		st.eintr.Add(1)
	}
}

// wait blocks until at least one CQE is in the ring. It returns EINTR
// (a signal: Go's preemption SIGURG, SIGPROF, ...) to the caller, which
// re-reaps and waits again.
func (r *ring) wait() error {
	_, err := sysEnter(r.fd, 0, 1, enterGetEvents)
	return err
}
