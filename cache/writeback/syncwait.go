package writeback

import (
	"context"
	"time"
)

// heldReleaseWait bounds how long WaitAll (`strata sync`) waits for the
// hold of an upload to end. A held upload belongs to a file one of whose
// descriptors was closed while the daemon still counts a writer open.
// close() returns before the daemon sees the file's RELEASE (the kernel
// sends it in the background), so `close; strata sync` usually finds the
// file's upload still held for a few milliseconds, longer on a loaded
// machine: sync waits for it. A file another descriptor really keeps open
// costs a sync this much, and is reported pending, not waited for. A var
// for tests.
var heldReleaseWait = 2 * time.Second

// WaitAll waits for the renames a restart is finishing, and for every
// upload committed so far to be complete or failed for good, then
// summarises. An upload held for a file still open is waited for only if
// its hold ends within heldReleaseWait; otherwise it counts as pending.
func (m *Manager) WaitAll(ctx context.Context) (Summary, error) {
	return m.WaitAllSince(ctx, time.Now())
}

// WaitAllSince is WaitAll for a sync that began at start and has waited
// since for something else (the filesystem, for files whose last release
// commits them): holds are waited for until heldReleaseWait after start,
// so that the two waits for releases share one bound.
func (m *Manager) WaitAllSince(ctx context.Context, start time.Time) (Summary, error) {
	select {
	case <-m.movesDone:
	case <-ctx.Done():
		return m.Summary(), ctx.Err()
	}
	m.mu.Lock()
	m.expediteLocked("") // the files closed start now, while held ones are waited for
	var js, held []*Job
	for j := range m.jobs {
		if j.held {
			held = append(held, j)
		} else {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	m.kick()
	if len(held) > 0 {
		released, err := m.awaitHoldsEnded(ctx, held, start.Add(heldReleaseWait))
		if err != nil {
			return m.Summary(), err
		}
		js = append(js, released...)
		m.mu.Lock()
		m.expediteLocked("")
		m.mu.Unlock()
		m.kick()
	}
	err := settled(ctx, js)
	return m.Summary(), err
}

// awaitHoldsEnded waits, until deadline at most, until none of held is
// still held, and returns those whose hold ended. A held job superseded
// meanwhile (the last close committed the file anew: a write after the
// previous close, through a mapping) stands for its successor, the
// upload that carries its bytes (held is the caller's, rewritten so).
func (m *Manager) awaitHoldsEnded(ctx context.Context, held []*Job, deadline time.Time) ([]*Job, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		m.mu.Lock()
		var ended []*Job
		for i, j := range held {
			for j.dropped != nil && j.successor != nil {
				j = j.successor
			}
			held[i] = j
			if !j.held || j.dropped != nil {
				ended = append(ended, j)
			}
		}
		if len(ended) == len(held) {
			m.mu.Unlock()
			return ended, nil
		}
		if m.holdEnded == nil {
			m.holdEnded = make(chan struct{})
		}
		ch := m.holdEnded
		m.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return ended, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// unholdLocked lets j's upload start. Caller holds m.mu.
func (m *Manager) unholdLocked(j *Job, now time.Time) {
	j.held, j.released = false, now
	m.holdEndedLocked()
}

// holdEndedLocked wakes the WaitAll calls waiting for holds to end: a
// held job was let go, or dropped (superseded, discarded, deleted).
// Caller holds m.mu.
func (m *Manager) holdEndedLocked() {
	if m.holdEnded != nil {
		close(m.holdEnded)
		m.holdEnded = nil
	}
}
