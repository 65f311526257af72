package uring

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// The completion side of uringEngine: reaping, short-transfer and retry
// resubmission, the reaper goroutine and Close.

// reap processes every CQE in the ring. With wait false it gives up at
// once if someone else is reaping: that reaper, or the dedicated one,
// will see what is left. CQEs are copied out and their slots freed before
// processing, so cqMu is never held while submitting.
func (e *shard) reap(wait bool) {
	var buf [32]cqe
	var rb [32]uint32
	for {
		if wait {
			e.cqMu.Lock()
		} else if !e.cqMu.TryLock() {
			return
		}
		n := e.ring.reapCQ(buf[:])
		e.cqMu.Unlock()
		if n == 0 {
			if !e.ring.overflowed() {
				return
			}
			e.ring.flushOverflow(&e.st)
			continue
		}
		resub := rb[:0]
		for _, c := range buf[:n] {
			resub = e.complete(c, resub)
		}
		if len(resub) > 0 {
			e.submit(resub)
		}
	}
}

// complete handles one CQE: finish the op, or append its id to resub to
// send the rest of a short transfer or retry a transient error.
func (e *shard) complete(c cqe, resub []uint32) []uint32 {
	if c.UserData == wakeUserData {
		return resub
	}
	id := uint32(c.UserData)
	r := &e.reqs[id]
	r.seq.Load()
	switch {
	case c.Res < 0:
		errno := errnoOf(c.Res)
		transient := errno == syscall.EINTR || errno == syscall.EAGAIN || errno == syscall.ECANCELED
		if transient && r.retries < maxRetries { // ECANCELED: the submitting thread exited
			r.retries++
			return e.again(id, resub)
		}
		e.finish(id, errno)
	case c.Res == 0 && r.op.Write:
		e.finish(id, io.ErrShortWrite)
	case c.Res == 0: // end of file
		e.finish(id, nil)
	default:
		r.done += int(c.Res)
		if r.done < len(r.op.Buf) {
			return e.again(id, resub)
		}
		e.finish(id, nil)
	}
	return resub
}

func (e *shard) again(id uint32, resub []uint32) []uint32 {
	e.st.resubmits.Add(1)
	return append(resub, id)
}

// finish records the op's result, frees its slot and, for the batch's
// last op, wakes the caller.
func (e *shard) finish(id uint32, err error) {
	r := &e.reqs[id]
	b, op, n := r.b, r.op, r.done
	r.b, r.op, r.done, r.retries = nil, nil, 0, 0
	op.N = n
	if err != nil {
		op.Err = opError(op, err)
	}
	e.pending.Add(-1)
	e.free <- id
	if b.remaining.Add(-1) == 0 {
		b.done <- struct{}{}
	}
}

// reaper waits in the kernel while ops are pending and processes their
// CQEs; with nothing pending it parks until kicked. It never gives up on
// pending ops: their buffers may be in use by the kernel until the CQE.
func (e *shard) reaper() {
	defer close(e.reaperDone)
	for {
		e.reap(true)
		if e.stopping.Load() {
			return
		}
		if e.pending.Load() == 0 {
			select {
			case <-e.kick:
			case <-e.stop:
			}
			continue
		}
		e.st.waits.Add(1)
		switch err := e.ring.wait(); {
		case err == nil:
		case errors.Is(err, syscall.EINTR):
			e.st.eintr.Add(1)
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ETIME):
		default: // not expected on a live ring; do not spin
			time.Sleep(time.Millisecond)
		}
	}
}

// Close waits for running calls (and so for every op in flight), stops
// the reapers, unmaps the rings and closes the ring fds. Later calls get
// ErrClosed.
func (e *uringEngine) Close() error {
	e.gate.Lock()
	defer e.gate.Unlock()
	if e.closed {
		return errCloseTwice
	}
	e.closed = true
	if err := e.closeShards(); err != nil {
		return fmt.Errorf("uring: close: %w", err)
	}
	return nil
}

func (e *uringEngine) closeShards() error {
	var errs []error
	for _, s := range e.shards {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// close stops the reaper and releases the ring. Nothing is in flight.
func (e *shard) close() error {
	e.stopping.Store(true)
	close(e.stop)
	for {
		e.nudge()
		select {
		case <-e.reaperDone:
			return e.ring.close()
		case <-time.After(100 * time.Millisecond): // NOP refused; try again
		}
	}
}

// nudge submits a NOP, whose CQE wakes a reaper blocked in the kernel.
func (e *shard) nudge() {
	e.sqMu.Lock()
	defer e.sqMu.Unlock()
	if !e.ring.sqFull() {
		s := e.ring.nextSQE()
		s.Opcode, s.UserData = opNop, wakeUserData
		e.ring.flush(&e.st)
	}
}
