package shared

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stratafs/strata/backend"
)

// launch starts the lookup of s.
func (r *reader) launch(s *segment) {
	s.launched = true
	if r.noTier || !s.probe && !r.t.brk.closed() {
		s.err = errSkipped
		close(s.done)
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	s.cancel = cancel
	s.timer = time.AfterFunc(r.t.opts.Timeout, func() { s.timedOut.Store(true); cancel() })
	name := r.t.keys.Object(r.id, s.group)
	off, n := r.t.layout.Span(s.from, s.to, r.blockLen(s.to))
	go func() {
		defer close(s.done)
		start := time.Now()
		body, err := r.t.store.ReadRange(ctx, name, "", off, n)
		fired := !s.timer.Stop()
		r.t.stats.Shared.Requests.Add(1)
		r.t.stats.Shared.Latency.Observe(time.Since(start))
		if fired && s.timedOut.Load() {
			if err == nil {
				body.Close()
			}
			body, err = nil, r.t.timeoutErr(name)
		}
		s.body, s.err = body, err
		if err != nil {
			r.lookupFailed(s, name, err)
		} else {
			r.t.brk.success(s.probe)
		}
	}()
}

// lookupFailed classifies a lookup without a body.
func (r *reader) lookupFailed(s *segment, name string, err error) {
	switch {
	case errors.Is(err, backend.ErrNotExist):
		r.t.brk.success(s.probe)
	case errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, backend.ErrUnavailable):
		// The range runs past the object: a truncated entry.
		r.t.brk.success(s.probe)
		r.t.badEntry(r, s.group, name, err)
	case s.dropped.Load() || r.ctx.Err() != nil && !s.timedOut.Load():
		r.t.brk.abandon(s.probe) // we or the caller gave up; says nothing of the tier
	default:
		r.t.tierFailed(s.probe, name, err)
	}
}

func (t *Tier) timeoutErr(name string) error {
	return fmt.Errorf("shared: %s: no answer within %s: %w", name, t.opts.Timeout, context.DeadlineExceeded)
}

// recordFailed ends s's use after a record could not be read or checked:
// its remaining blocks come from the origin.
func (r *reader) recordFailed(s *segment, err error, timedOut bool) {
	s.body.Close()
	s.body, s.err = nil, err
	s.cancel()
	name := r.t.keys.Object(r.id, s.group)
	switch {
	case timedOut:
		r.t.tierFailed(false, name, r.t.timeoutErr(name))
		r.dropTier()
	case r.ctx.Err() != nil:
	case errors.Is(err, ErrBadRecord),
		(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && !errors.Is(err, backend.ErrUnavailable):
		r.t.brk.success(false)
		r.t.badEntry(r, s.group, name, err)
	default:
		r.t.tierFailed(false, name, err)
		r.dropTier()
	}
}

// dropTier gives up the tier for the rest of this read after it failed or
// stalled: the lookups ahead are cancelled (without counting against the
// tier) and their blocks join the origin run.
func (r *reader) dropTier() {
	r.noTier = true
	for _, s := range r.segs[r.segIndex(r.cur)+1 : r.next] {
		s.dropped.Store(true)
		if s.cancel != nil {
			s.cancel()
		}
		<-s.done
		if s.body != nil {
			s.body.Close()
			s.body, s.err = nil, errSkipped
		}
	}
}
