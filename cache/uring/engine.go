package uring

import (
	"errors"
	"fmt"
)

// Op is one positioned read or write on a cache file.
type Op struct {
	Fd    int    // open file descriptor of the cache file
	Off   int64  // file offset
	Buf   []byte // data to write, or room to read into
	Write bool   // true: pwrite Buf at Off; false: pread into Buf

	// Results, set by Engine.Do.
	N   int   // bytes transferred
	Err error // nil, or the failure (short writes are retried, never reported as success)
}

// Engine performs cache-file I/O. Implementations are safe for concurrent
// use by many goroutines.
type Engine interface {
	// Do runs every op, possibly in one batched submission, and returns
	// when all are complete; each Op's N and Err are set. Reads stop
	// short only at end of file (N < len(Buf), Err nil).
	Do(ops []Op)
	// ReadAt and WriteAt are single-op conveniences with pread/pwrite
	// semantics (WriteAt writes all of p or returns an error).
	ReadAt(fd int, p []byte, off int64) (int, error)
	WriteAt(fd int, p []byte, off int64) (int, error)
	// Name is "uring" or "pread".
	Name() string
	// Close releases the engine; in-flight calls finish first.
	Close() error
}

// Kind selects an engine: auto, uring or pread.
type Kind string

const (
	KindAuto  Kind = "auto"
	KindUring Kind = "uring"
	KindPread Kind = "pread"
)

// ErrUnavailable: io_uring cannot be used here (kernel too old, disabled
// by sysctl io_uring_disabled, or blocked by a seccomp profile).
var ErrUnavailable = errors.New("io_uring unavailable")

// ParseKind validates a --io-engine value.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindAuto, KindUring, KindPread:
		return k, nil
	}
	return "", fmt.Errorf("io engine %q: want auto, uring or pread", s)
}
