package uring

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI from include/uapi/linux/io_uring.h, defined by hand:
// golang.org/x/sys/unix has only the syscall numbers. Layouts were checked
// against the kernel (notes §4.2) and are pinned by the size asserts below.

// sqe is struct io_uring_sqe (64 bytes; we never set IORING_SETUP_SQE128).
type sqe struct {
	Opcode      uint8  // 0   IORING_OP_*
	Flags       uint8  // 1   IOSQE_*
	Ioprio      uint16 // 2
	Fd          int32  // 4
	Off         uint64 // 8
	Addr        uint64 // 16  buffer address
	Len         uint32 // 24  buffer length
	OpFlags     uint32 // 28  rw_flags (RWF_*)
	UserData    uint64 // 32  echoed in the CQE
	BufIndex    uint16 // 40
	Personality uint16 // 42
	SpliceFdIn  int32  // 44
	Addr3       uint64 // 48
	_           uint64 // 56
}

// cqe is struct io_uring_cqe (16 bytes; no IORING_SETUP_CQE32).
type cqe struct {
	UserData uint64
	Res      int32 // bytes transferred, or -errno
	Flags    uint32
}

// sqRingOffsets is struct io_sqring_offsets.
type sqRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

// cqRingOffsets is struct io_cqring_offsets.
type cqRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// params is struct io_uring_params.
type params struct {
	SqEntries, CqEntries, Flags, SqThreadCPU, SqThreadIdle, Features, WqFd uint32
	Resv                                                                   [3]uint32
	SqOff                                                                  sqRingOffsets
	CqOff                                                                  cqRingOffsets
}

// probeOp is struct io_uring_probe_op; probe is struct io_uring_probe with
// room for every opcode number a uint8 can hold.
type probeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

type probe struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
	Ops    [256]probeOp
}

// Compile-time layout checks: a wrong field breaks the build, not the kernel.
var (
	_ [64]byte         = [unsafe.Sizeof(sqe{})]byte{}
	_ [16]byte         = [unsafe.Sizeof(cqe{})]byte{}
	_ [40]byte         = [unsafe.Sizeof(sqRingOffsets{})]byte{}
	_ [40]byte         = [unsafe.Sizeof(cqRingOffsets{})]byte{}
	_ [120]byte        = [unsafe.Sizeof(params{})]byte{}
	_ [40]byte         = [unsafe.Offsetof(params{}.SqOff)]byte{}
	_ [80]byte         = [unsafe.Offsetof(params{}.CqOff)]byte{}
	_ [32]byte         = [unsafe.Offsetof(sqe{}.UserData)]byte{}
	_ [8]byte          = [unsafe.Sizeof(probeOp{})]byte{}
	_ [16 + 256*8]byte = [unsafe.Sizeof(probe{})]byte{}
)

const (
	// mmap offsets
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	// io_uring_params.features
	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1

	// io_uring_params.flags (setup)
	setupClamp     = 1 << 4
	setupSubmitAll = 1 << 7

	// opcodes
	opNop   = 0
	opRead  = 22
	opWrite = 23

	// io_uring_enter flags
	enterGetEvents = 1 << 0

	// sq ring flags
	sqCQOverflow = 1 << 1

	// io_uring_register opcodes
	registerProbe = 8

	// io_uring_probe_op.flags
	opSupported = 1 << 0

	// maxRW is the most one SQE or pread moves (the kernel's MAX_RW_COUNT
	// is INT_MAX rounded down to a page); longer ops continue as short I/O.
	maxRW = 1 << 30
)

func sysSetup(entries uint32, p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// sysEnter is one io_uring_enter. It uses Syscall6, not RawSyscall, so the
// runtime hands the P to another thread while this one waits in the kernel.
// It does not retry EINTR: callers decide, because after EINTR they must
// re-read the rings to learn what was consumed.
func sysEnter(fd int, toSubmit, minComplete, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd),
		uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func sysRegister(fd int, opcode uint32, arg unsafe.Pointer, nr uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd),
		uintptr(opcode), uintptr(arg), uintptr(nr), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// probeRW reports whether the ring supports IORING_OP_READ and _WRITE
// (Linux 5.6+). REGISTER_PROBE itself is 5.6+, so EINVAL means "too old".
func probeRW(fd int) error {
	p := new(probe) // heap: the kernel writes ~2 KiB into it
	if err := sysRegister(fd, registerProbe, unsafe.Pointer(p), uint32(len(p.Ops))); err != nil {
		return err
	}
	for _, op := range []uint8{opRead, opWrite} {
		if op > p.LastOp || p.Ops[op].Flags&opSupported == 0 {
			return syscall.EOPNOTSUPP
		}
	}
	return nil
}

// errnoOf turns a negative CQE result into an errno.
func errnoOf(res int32) syscall.Errno { return syscall.Errno(-res) }
