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

// WaitAll waits for the renames a restart is finishing, for every upload
// committed so far to be complete or failed for good, and then for the
// take-downs under way (takedown_state.go), then summarises. An upload held for a file still open, and a file to be
// published at its last release (PublishAtRelease), are waited for only
// if that release comes within heldReleaseWait; otherwise the upload
// counts as pending.
func (m *Manager) WaitAll(ctx context.Context) (Summary, error) {
	start := time.Now()
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
	var sessions []*Staging
	for s := range m.open {
		if s.atRelease {
			sessions = append(sessions, s)
		}
	}
	m.mu.Unlock()
	m.kick()
	if len(held) > 0 || len(sessions) > 0 {
		released, err := m.awaitReleases(ctx, sessions, held, start.Add(heldReleaseWait))
		if err != nil {
			return m.Summary(), err
		}
		js = append(js, released...)
		m.mu.Lock()
		m.expediteLocked("")
		m.mu.Unlock()
		m.kick()
	}
	if err := settled(ctx, js); err != nil {
		return m.Summary(), err
	}
	// After the uploads: one whose delete of an old name failed hands
	// it to a take-down before it settles.
	err := m.waitTakeDowns(ctx)
	return m.Summary(), err
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
