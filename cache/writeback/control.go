package writeback

import (
	"context"
	"path/filepath"
	"sort"
	"time"
)

// Cancel forgets every pending upload of key (the file was deleted before
// it reached the bucket), and its kept copy of a write never uploaded.
func (m *Manager) Cancel(key string) {
	m.mu.Lock()
	for _, j := range append([]*Job(nil), m.byKey[key]...) {
		m.dropOrCancelLocked(j, errCancelled)
	}
	kept := m.forgetKeptLocked(key)
	m.mu.Unlock()
	kept.remove()
	m.kick()
}

// Rekey moves the pending uploads of key to newKey (a rename before the
// upload). thenDelete, if not "", is removed from the bucket once the
// renamed file is up (the old name's previous object). It reports whether
// there was anything pending.
func (m *Manager) Rekey(key, newKey, thenDelete string) bool {
	m.mu.Lock()
	js := m.byKey[key]
	if len(js) == 0 {
		m.mu.Unlock()
		return false
	}
	delete(m.byKey, key)
	for i, j := range js {
		j.rec.Key = newKey
		// rename(2) replaces whatever the new name holds: the upload is no
		// longer conditional on the old name's base version.
		j.rec.BaseVersion = ""
		if i == len(js)-1 && thenDelete != "" {
			j.rec.ThenDelete = thenDelete
		}
		if j.failed { // the new name gets a fresh chance (old waiters keep the old verdict)
			nj := newJob(j.seq, j.rec, j.reserved)
			m.jobs[j.seq], js[i] = nj, nj
			j = nj
		}
		if err := m.ix.PutUpload(j.seq, j.rec); err != nil {
			m.log.Warn("writeback: journaling the new name", "key", key, "new", newKey, "err", err)
		}
		if j.running {
			j.requeue = true
			j.cancel()
		}
	}
	m.byKey[newKey] = append(m.byKey[newKey], js...)
	m.supersedeLocked(newKey)
	m.mu.Unlock()
	m.kick()
	return true
}

// Pending reports whether key has an upload not yet complete.
func (m *Manager) Pending(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey[key]) > 0
}

// WaitKey waits for every upload of key committed so far; it returns the
// error of the one that failed, if any.
func (m *Manager) WaitKey(ctx context.Context, key string) error {
	m.mu.Lock()
	js := append([]*Job(nil), m.byKey[key]...)
	m.mu.Unlock()
	var first error
	for _, j := range js {
		if err := j.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Failure is one upload that gave up.
type Failure struct {
	Key     string `json:"key"`
	Error   string `json:"error"`
	Staging string `json:"staged_copy"`
}

// Summary is the state of the write path.
type Summary struct {
	Pending      int       `json:"pending"`
	PendingBytes int64     `json:"pending_bytes"`
	Oldest       time.Time `json:"oldest_pending,omitzero"` // when the oldest pending upload was committed
	Failed       []Failure `json:"failed,omitempty"`
}

// WaitAll waits for every upload committed so far to be complete or
// failed for good, then summarises. Uploads held for a file still open
// are not waited for (they count as pending).
func (m *Manager) WaitAll(ctx context.Context) (Summary, error) {
	m.mu.Lock()
	var js []*Job
	for _, j := range m.jobs {
		if !j.held {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	for _, j := range js {
		select {
		case <-j.done:
		case <-ctx.Done():
			return m.Summary(), ctx.Err()
		}
	}
	return m.Summary(), nil
}

// Summary reports pending and failed uploads now.
func (m *Manager) Summary() Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s Summary
	for _, j := range m.jobs {
		if j.failed {
			s.Failed = append(s.Failed, Failure{Key: j.rec.Key, Error: j.rec.LastError, Staging: filepath.Join(m.store.StagingDir(), j.rec.Staging)})
			continue
		}
		if j.dropped == nil {
			s.Pending++
			s.PendingBytes += j.rec.Size
			if c := time.Unix(0, j.rec.Created); s.Oldest.IsZero() || c.Before(s.Oldest) {
				s.Oldest = c
			}
		}
	}
	s.Failed = append(s.Failed, m.keptFailuresLocked()...)
	sort.Slice(s.Failed, func(a, b int) bool { return s.Failed[a].Key < s.Failed[b].Key })
	return s
}
