package uring

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// O_DIRECT for cache fills.
//
// Fetched blocks are written once and read later through the page cache of
// the FUSE or passthrough side, so writing them buffered caches them twice.
// A caller that wants to avoid that opens a second fd on the cache file
// with OpenDirect and, for each block it writes, builds the ops with
// AppendWriteOps: the aligned whole pages go through the O_DIRECT fd, the
// rest (the last partial block of an object) through the buffered fd, both
// in one Do. Buffers come from AllocAligned. Rules the helpers enforce:
//
//   - Offset and length of a direct write are multiples of the file's
//     offset alignment and of the page size, and the buffer address is a
//     multiple of the memory alignment (DIOAlignFd; 4096 when the kernel
//     cannot say).
//   - A direct write never shares a page with a buffered write: a buffered
//     write dirties the whole page and its later writeback would overwrite
//     the direct bytes with stale ones.
//   - Data written direct is read back through any fd; the kernel writes
//     back and invalidates cached pages of the range around the direct I/O.

// ErrDirectUnsupported: the filesystem refuses O_DIRECT on this file.
var ErrDirectUnsupported = errors.New("O_DIRECT not supported")

// Alignment is what O_DIRECT I/O on one file requires.
type Alignment struct {
	Mem    int // buffer address alignment
	Offset int // file offset and length alignment
}

// DefaultAlignment is assumed when statx cannot report STATX_DIOALIGN
// (Linux < 6.1, or a filesystem that does not fill it): safe on every
// common device, whose logical blocks are 512 or 4096 bytes.
var DefaultAlignment = Alignment{Mem: 4096, Offset: 4096}

// DIOAlignFd returns the O_DIRECT alignment of the open regular file fd.
// It fails with ErrDirectUnsupported when the kernel reports that the file
// does not support direct I/O at all.
func DIOAlignFd(fd int) (Alignment, error) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st)
	switch {
	case errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL):
		return DefaultAlignment, nil
	case err != nil:
		return Alignment{}, fmt.Errorf("uring: statx fd %d: %w", fd, err)
	case st.Mask&unix.STATX_DIOALIGN == 0:
		return DefaultAlignment, nil
	case st.Dio_offset_align == 0:
		return Alignment{}, fmt.Errorf("uring: statx fd %d: %w", fd, ErrDirectUnsupported)
	}
	return Alignment{Mem: int(st.Dio_mem_align), Offset: int(st.Dio_offset_align)}, nil
}

// OpenDirect opens an existing cache file for O_DIRECT writes. It fails
// with ErrDirectUnsupported (and the errno) where the filesystem refuses
// O_DIRECT; callers then write everything through the buffered fd.
func OpenDirect(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
		return -1, fmt.Errorf("uring: open direct %s: %w: %w", path, ErrDirectUnsupported, err)
	}
	if err != nil {
		return -1, fmt.Errorf("uring: open direct %s: %w", path, err)
	}
	return fd, nil
}

// AllocAligned returns a zeroed n-byte slice whose first byte is page
// aligned, which satisfies the memory alignment of O_DIRECT on Linux
// filesystems (Dio_mem_align is at most the logical block size). It is
// ordinary Go heap: the GC frees it when unreferenced and never moves it,
// so it is safe to hand to the kernel for as long as the caller holds it,
// and there is no Free to forget or to call too early.
func AllocAligned(n int) []byte {
	pg := os.Getpagesize()
	raw := make([]byte, n+pg)
	skip := (pg - int(uintptr(unsafe.Pointer(&raw[0]))&uintptr(pg-1))) & (pg - 1)
	return raw[skip : skip+n : skip+n]
}

// unit is the granule of a direct write: the offset alignment, at least a
// page so that direct and buffered writes never share a page.
func (a Alignment) unit() int { return max(a.Offset, os.Getpagesize()) }

// DirectLen returns how many leading bytes of buf, written at off, may go
// through an O_DIRECT fd: the whole aligned units, or 0 when off or the
// buffer address is misaligned.
func (a Alignment) DirectLen(buf []byte, off int64) int {
	u := a.unit()
	if len(buf) < u || a.Mem <= 0 || off%int64(u) != 0 ||
		uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%uintptr(a.Mem) != 0 {
		return 0
	}
	return len(buf) / u * u
}

// AppendWriteOps appends to ops the writes that put buf at off in a cache
// file: the DirectLen prefix through directFd, the rest through
// bufferedFd. With directFd < 0 everything goes buffered. It appends at
// most two ops and allocates only if ops has no room.
func AppendWriteOps(ops []Op, directFd, bufferedFd int, a Alignment, buf []byte, off int64) []Op {
	k := 0
	if directFd >= 0 {
		k = a.DirectLen(buf, off)
	}
	if k > 0 {
		ops = append(ops, Op{Fd: directFd, Off: off, Buf: buf[:k], Write: true})
	}
	if k < len(buf) {
		ops = append(ops, Op{Fd: bufferedFd, Off: off + int64(k), Buf: buf[k:], Write: true})
	}
	return ops
}
