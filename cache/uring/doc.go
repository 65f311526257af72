// Package uring owns cache-file I/O: positioned reads and writes of
// blocks in the cache's sparse files, behind the Engine interface, with
// two implementations chosen by New:
//
//   - pread: unix.Pread/Pwrite loops. Do fans a batch out over at most
//     Options.Parallelism goroutines (the caller's included); each blocked
//     syscall parks an OS thread, not a P. Short transfers continue,
//     EINTR is retried.
//   - uring: io_uring by hand on golang.org/x/sys/unix (abi.go: structs
//     with compile-time size asserts, constants, probe; ring.go: setup,
//     mmap honouring IORING_FEAT_SINGLE_MMAP, SQ/CQ protocol; uring.go:
//     submission; reap.go: completion, reaper, Close).
//
// It also owns the O_DIRECT helpers for cache fills (direct.go):
// AllocAligned, DIOAlignFd (statx STATX_DIOALIGN, 4096 fallback),
// OpenDirect and AppendWriteOps, which route whole aligned pages of a
// block to an O_DIRECT fd and the rest (an object's last partial block)
// to the buffered fd.
//
// # Structure of the io_uring engine
//
// The engine is Options.Rings independent rings (default one per CPU, at
// most 8); each Do or ReadAt/WriteAt goes whole to the next ring,
// round-robin. Per ring ("shard"):
//
//   - Submission: any goroutine. Under sqMu it takes one free slot per op
//     from the shard's in-flight table (reqs, indexed by user_data), fills
//     one SQE per op and calls io_uring_enter once for the whole batch, or
//     once per SQ-full when the batch is larger than the SQ. Slots number
//     CQ-size, so no more ops are in flight than the CQ holds and it
//     cannot overflow; a batch larger than that waits for slots, after
//     submitting the ones it holds.
//   - Completion: page-cache hits complete inside io_uring_enter, so the
//     submitter reaps the CQ itself right after (TryLock on cqMu: if
//     someone else is reaping, they will see its CQEs). Ops that go async
//     (disk reads, ext4 buffered writes punted to io-wq) are reaped by
//     the shard's reaper goroutine, which blocks in io_uring_enter
//     (GETEVENTS) while ops are pending and parks on a channel when none
//     are, so idle rings cost no wakeups. Short transfers and transient
//     errors (EINTR, EAGAIN, ECANCELED) are resubmitted for the rest, by
//     whoever reaped them. The batch's last completion wakes its caller.
//   - Why not one locked owner thread with SINGLE_ISSUER|DEFER_TASKRUN:
//     every call would cost two goroutine hand-offs (caller -> owner ->
//     caller) plus an eventfd wakeup for the owner blocked in the kernel,
//     and page-cache hits could never complete on the caller's thread.
//     The shared ring keeps default setup flags, so completion task_work
//     runs on whichever thread submitted (the kernel signals it, which Go
//     threads tolerate like any signal) and concurrent io_uring_enter
//     calls from submitters and the reaper are legal.
//   - Why several rings: the kernel submits under a per-ring lock and
//     copies page-cache hits inline on the submitting thread, so one ring
//     moves data on one thread at a time however many goroutines call it
//     (16 callers of 1 MiB reads on the 2-vCPU test machine: 4-6 GB/s on
//     one ring, 12 GB/s on two). IOSQE_ASYNC instead was measured worse:
//     io-wq runs CPU-bound copies from one submitter on one worker, and
//     the hand-off doubled the latency of single reads.
//
// Go runtime rules kept: io_uring_enter goes through unix.Syscall6 (not
// RawSyscall) so the P is handed off while a thread waits in the kernel;
// every EINTR is retried (Go's signals are not all SA_RESTART, and
// io_uring waits return EINTR anyway); buffers passed to the kernel are
// referenced from the in-flight table until their final CQE, so the GC
// (which does not move heap objects) keeps them, and they are heap
// memory because an interface call makes Op buffers escape; the reaper
// never abandons a pending op, because the kernel may still write into
// its buffer. Kernel-shared ring indices use sync/atomic, whose
// sequentially consistent loads and stores satisfy every acquire/release
// pairing the kernel requires.
//
// Close takes the gate exclusively, so it waits for every running call
// (and with them every op in flight); then it stops each reaper (a NOP
// wakes one blocked in the kernel), unmaps the rings and closes the ring
// fds. Calls after Close fail with ErrClosed and never touch the rings.
//
// Setup failures of any kind (io_uring_disabled sysctl, ENOSYS, EPERM
// from seccomp, a kernel older than 5.6 without IORING_OP_READ/WRITE or
// without IORING_FEAT_NODROP) are ErrUnavailable with the reason; KindAuto
// then uses pread. What KindAuto prefers, and the measurements behind it,
// are beside autoKind in options.go.
//
// # Lock order
//
// gate (shared by calls, exclusive by Close) -> a shard's sqMu or cqMu.
// cqMu is a leaf: CQEs are copied out and the lock released before any
// completion is processed or resubmitted, so sqMu and cqMu are never held
// together. No lock is held while a caller waits for its batch.
package uring
