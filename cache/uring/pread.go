package uring

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// preadEngine runs each op as pread/pwrite loops. A batch fans out over at
// most Parallelism goroutines, the caller's included: each blocked syscall
// parks an OS thread, not a P, so this is how plain syscalls get queue
// depth from Go.
type preadEngine struct {
	gate   sync.RWMutex // Do/ReadAt/WriteAt hold it shared, Close exclusive
	closed bool         // guarded by gate

	par   int
	chunk int
	st    stats

	// The syscalls, swappable by tests to inject EINTR and short transfers.
	pread, pwrite func(fd int, p []byte, off int64) (int, error)
}

func newPread(o Options) *preadEngine {
	return &preadEngine{par: o.Parallelism, chunk: o.maxChunk, pread: unix.Pread, pwrite: unix.Pwrite}
}

func (e *preadEngine) Name() string { return string(KindPread) }

func (e *preadEngine) Do(ops []Op) {
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed {
		for i := range ops {
			ops[i].N, ops[i].Err = 0, closedError(&ops[i])
		}
		return
	}
	workers := min(len(ops), e.par)
	if workers <= 1 {
		for i := range ops {
			e.run(&ops[i])
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(ops) {
				return
			}
			e.run(&ops[i])
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

func (e *preadEngine) ReadAt(fd int, p []byte, off int64) (int, error) {
	return e.single(Op{Fd: fd, Buf: p, Off: off})
}

func (e *preadEngine) WriteAt(fd int, p []byte, off int64) (int, error) {
	return e.single(Op{Fd: fd, Buf: p, Off: off, Write: true})
}

func (e *preadEngine) single(op Op) (int, error) {
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed {
		return 0, closedError(&op)
	}
	e.run(&op)
	return op.N, op.Err
}

// run performs one op to completion: short transfers continue where they
// stopped, EINTR is retried, a read of 0 bytes is end of file.
func (e *preadEngine) run(op *Op) {
	if op.N, op.Err = 0, validate(op); op.Err != nil {
		return
	}
	for op.N < len(op.Buf) {
		p := op.Buf[op.N:]
		if len(p) > e.chunk {
			p = p[:e.chunk]
		}
		var n int
		var err error
		if op.Write {
			n, err = e.pwrite(op.Fd, p, op.Off+int64(op.N))
		} else {
			n, err = e.pread(op.Fd, p, op.Off+int64(op.N))
		}
		if n > 0 { // on error the syscall layer reports n == -1
			op.N += n
		}
		switch {
		case errors.Is(err, syscall.EINTR):
			e.st.eintr.Add(1)
		case err != nil:
			op.Err = opError(op, err)
			return
		case n == 0 && op.Write:
			op.Err = opError(op, io.ErrShortWrite)
			return
		case n == 0:
			return // end of file
		case n < len(p):
			e.st.resubmits.Add(1)
		}
	}
}

// Close waits for running calls, then refuses new ones with ErrClosed.
func (e *preadEngine) Close() error {
	e.gate.Lock()
	defer e.gate.Unlock()
	if e.closed {
		return errCloseTwice
	}
	e.closed = true
	return nil
}
