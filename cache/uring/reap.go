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
func (sh *shard) reap(wait bool) {
	var buf [32]cqe
	var rb [32]uint32
	for {
		if wait {
			sh.cqMu.Lock()
		} else if !sh.cqMu.TryLock() {
			return
		}
		n := sh.ring.reapCQ(buf[:])
		sh.cqMu.Unlock()
		if n == 0 {
			if !sh.ring.overflowed() {
				return
			}
			sh.ring.flushOverflow(&sh.st)
			continue
		}
		resub := rb[:0]
		for _, c := range buf[:n] {
			resub = sh.complete(c, resub)
		}
		if len(resub) > 0 {
			sh.submit(resub)
		}
	}
}

// complete handles one CQE: finish the op, or append its id to resub to
// send the rest of a short transfer or retry a transient error.
func (sh *shard) complete(c cqe, resub []uint32) []uint32 {
	if c.UserData == wakeUserData {
		return resub
	}
	id := uint32(c.UserData)
	r := &sh.reqs[id]
	r.seq.Load()
	switch {
	case c.Res < 0:
		errno := errnoOf(c.Res)
		transient := errno == syscall.EINTR || errno == syscall.EAGAIN || errno == syscall.ECANCELED
		if transient && r.retries < maxRetries { // ECANCELED: the submitting thread exited
			r.retries++
			return sh.again(id, resub)
		}
		sh.finish(id, errno)
	case c.Res == 0 && r.op.Write:
		sh.finish(id, io.ErrShortWrite)
	case c.Res == 0: // end of file
		sh.finish(id, nil)
	default:
		r.done += int(c.Res)
		if r.done < len(r.op.Buf) {
			return sh.again(id, resub)
		}
		sh.finish(id, nil)
	}
	return resub
}

func (sh *shard) again(id uint32, resub []uint32) []uint32 {
	sh.st.resubmits.Add(1)
	return append(resub, id)
}

// finish records the op's result, frees its slot and, for the batch's
// last op, wakes the caller.
func (sh *shard) finish(id uint32, err error) {
	r := &sh.reqs[id]
	b, op, n := r.b, r.op, r.done
	r.b, r.op, r.done, r.retries = nil, nil, 0, 0
	op.N = n
	if err != nil {
		op.Err = opError(op, err)
	}
	sh.pending.Add(-1)
	sh.free <- id
	if b.remaining.Add(-1) == 0 {
		b.done <- struct{}{}
	}
}

// reaper waits in the kernel while ops are pending and processes their
// CQEs; with nothing pending it parks until kicked. It never gives up on
// pending ops: their buffers may be in use by the kernel until the CQE.
func (sh *shard) reaper() {
	defer close(sh.reaperDone)
	for {
		sh.reap(true)
		if sh.stopping.Load() {
			return
		}
		if sh.pending.Load() == 0 {
			select {
			case <-sh.kick:
			case <-sh.stop:
			}
			continue
		}
		sh.st.waits.Add(1)
		switch err := sh.ring.wait(); {
		case err == nil:
		case errors.Is(err, syscall.EINTR):
			sh.st.eintr.Add(1)
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
func (sh *shard) close() error {
	sh.stopping.Store(true)
	close(sh.stop)
	for {
		sh.nudge()
		select {
		case <-sh.reaperDone:
			return sh.ring.close()
		case <-time.After(100 * time.Millisecond): // NOP refused; try again
		}
	}
}

// nudge submits a NOP, whose CQE wakes a reaper blocked in the kernel.
func (sh *shard) nudge() {
	sh.sqMu.Lock()
	defer sh.sqMu.Unlock()
	if !sh.ring.sqFull() {
		s := sh.ring.nextSQE()
		s.Opcode, s.UserData = opNop, wakeUserData
		sh.ring.flush(&sh.st)
	}
}
