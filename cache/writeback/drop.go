package writeback

// How a job ends without its upload: superseded by a newer commit,
// cancelled by a delete, or forgotten once settled.

import (
	"os"
	"path/filepath"

	"github.com/stratafs/strata/cache/index"
)

// removeLocked forgets a settled job. Caller holds m.mu.
func (m *Manager) removeLocked(j *Job) {
	delete(m.jobs, j)
	j.content.Release()
	j.content = nil
	js := m.byKey[j.rec.Key]
	for i, x := range js {
		if x == j {
			js = append(js[:i], js[i+1:]...)
			break
		}
	}
	if len(js) == 0 {
		delete(m.byKey, j.rec.Key)
	} else {
		m.byKey[j.rec.Key] = js
	}
}

// dropLocked discards a job that will never upload: its staged file, its
// space, its journal entry (a job still journaling: its Journal call does
// that part). Caller holds m.mu.
func (m *Manager) dropLocked(j *Job) {
	if j.held {
		m.holdEndedLocked()
	}
	j.eager.abortAsync()
	j.eager = nil
	m.removeLocked(j)
	j.settle(j.dropped)
	if j.journaling {
		return
	}
	if j.rec.State == index.UploadOvertaken && m.ctx.Err() != nil {
		// Cut by the mount's end, its last request may land yet: the
		// next mount checks (overtaken.go).
		m.store.ReleaseStaging(j.reserved)
		j.reserved = 0
		return
	}
	// Journal entry first, file second (see complete).
	if j.seq != 0 {
		m.deleteUpload(j.seq, j.rec.Key)
	}
	m.crashPoint()
	os.Remove(filepath.Join(m.store.StagingDir(), j.rec.Staging))
	m.store.ReleaseStaging(j.reserved)
	j.reserved = 0
	m.crashPoint()
}

// supersedeLocked drops every older job of key: the newest commit wins.
// Caller holds m.mu.
func (m *Manager) supersedeLocked(key string) {
	// A copy: dropping a job removes it from m.byKey[key] in place, which
	// shifted the newest into the range being walked, and dropped it.
	js := m.byKey[key]
	older := append([]*Job(nil), js[:max(len(js)-1, 0)]...)
	for _, j := range older {
		if j.dropped == nil {
			j.successor = js[len(js)-1]
		}
		m.dropOrCancelLocked(j, errSuperseded)
	}
}

// dropOrCancelLocked drops a job now, or cancels it if it is uploading
// (finish then drops it). Caller holds m.mu.
func (m *Manager) dropOrCancelLocked(j *Job, why error) {
	if j.dropped != nil {
		return
	}
	j.dropped = why
	if j.running {
		if why == errCancelled {
			m.hideLocked(j, j.rec.Key)
		}
		j.cancel()
		if why == errCancelled {
			// Deleted: journaled as an upload to take down, not to send,
			// until the attempt ends (overtaken.go).
			m.journalOvertakenLocked(j)
		}
		return
	}
	m.dropLocked(j)
}
