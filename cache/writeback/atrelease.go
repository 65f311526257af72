package writeback

import (
	"context"
	"time"
)

// A file a close left dirty without publishing it is published at its
// last RELEASE: the closer wrote nothing new (`: > file`, an open(O_TRUNC)
// closed with no write; a file written by a process that has not closed
// it yet). The kernel sends that RELEASE after close() has returned, so
// a `strata sync` in between finds no upload to wait for. The filesystem
// marks such a session at the close (PublishAtRelease), and WaitAll waits
// for it to end, then for the upload it became, within the same bound as
// for held uploads (heldReleaseWait): both wait for a RELEASE on its way.

// PublishAtRelease marks the session as one a close left dirty without
// publishing it: WaitAll waits for it. A session ended already is left
// as it is.
func (s *Staging) PublishAtRelease() {
	m := s.m
	m.mu.Lock()
	if _, open := m.open[s]; open {
		s.atRelease = true
	}
	m.mu.Unlock()
}

// awaitReleases waits, until deadline at most, until none of sessions
// (published at their release) is still open and none of held (and of
// the uploads those sessions became) is still held, and returns the
// uploads that are no longer held. A held job superseded meanwhile (the
// last close committed the file anew: a write after the previous close,
// through a mapping) stands for its successor, the upload that carries
// its bytes.
func (m *Manager) awaitReleases(ctx context.Context, sessions []*Staging, held []*Job, deadline time.Time) ([]*Job, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		m.mu.Lock()
		open := sessions[:0]
		for _, s := range sessions {
			switch _, ok := m.open[s]; {
			case ok:
				open = append(open, s)
			case s.job != nil:
				held = append(held, s.job) // waited for as a held one: it may be
			}
		}
		sessions = open
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
		if len(sessions) == 0 && len(ended) == len(held) {
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
