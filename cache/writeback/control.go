package writeback

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// Cancel forgets every pending upload of key (the file was deleted before
// it reached the bucket), and its kept copy of a write never uploaded.
func (m *Manager) Cancel(key string) {
	m.mu.Lock()
	for _, j := range append([]*Job(nil), m.byKey[key]...) {
		if j.running && errors.Is(j.dropped, errSuperseded) {
			// Superseded while its attempt ran, which may still land:
			// as a deleted file's, it is then taken back down, and the
			// name not shown again (upload). Journaled as such.
			j.dropped = errCancelled
			m.hideLocked(j, key)
			m.journalOvertakenLocked(j)
			continue
		}
		m.dropOrCancelLocked(j, errCancelled)
	}
	kept := m.forgetKeptLocked(key)
	m.mu.Unlock()
	kept.remove()
	m.kick()
}

// Rekeyed is what a Rekey moved.
type Rekeyed struct {
	// Moved: an upload now waits under the new key. False when the old
	// key had none, or when its upload has already landed in the bucket
	// under the old key (the caller waits for it with WaitKey and renames
	// the object).
	Moved bool
	// Unsent: the old key had uploads, and none of them can have put an
	// object there: none started (in this mount's life; a journaled one
	// restored at boot may have, before the crash), and the first was of
	// a file created here over nothing. A rename then has nothing to
	// delete under the old name.
	Unsent bool
}

// Rekey moves the pending uploads and open write sessions of key to
// newKey (a rename before the upload). thenDelete, if not "", is removed
// from the bucket once the renamed file is up (the old name's previous
// object). An error means the journal could not record the new name;
// nothing moved.
func (m *Manager) Rekey(key, newKey, thenDelete string) (Rekeyed, error) {
	m.mu.Lock()
	r, away, err := m.rekeyLocked(key, newKey, thenDelete)
	m.mu.Unlock()
	m.journalRenamedAway(away, key) // before the rename returns: a kill -9 after it finds the entries
	m.kick()
	return r, err
}

// rekeyLocked is Rekey under m.mu; it returns the running jobs whose old
// name's take-down is to be journaled (overtaken.go).
func (m *Manager) rekeyLocked(key, newKey, thenDelete string) (Rekeyed, []*Job, error) {
	now := time.Now()
	for s := range m.open {
		if s.key == key {
			s.key = newKey // its untrack counts it off newKey's directory
			m.touchLocked(key, -1, now)
			m.touchLocked(newKey, 1, now)
		}
	}
	m.touchLocked(newKey, 0, now)
	all := m.byKey[key]
	unsent := len(all) > 0 && all[0].rec.BaseVersion == backend.VersionAbsent
	for _, j := range all {
		unsent = unsent && !j.sent && !j.landed && j.eager == nil
	}
	// A job whose object has landed under key stays there and settles;
	// the caller renames the bucket's object (moving it would requeue an
	// upload whose staged file is already the cache's copy of key).
	var js, landed []*Job
	for _, j := range all {
		if j.landed {
			landed = append(landed, j)
		} else {
			js = append(js, j)
		}
	}
	if len(js) == 0 {
		return Rekeyed{}, nil, nil
	}
	recs := make([]index.UploadRecord, len(js))
	for i, j := range js {
		r := j.rec
		r.Key = newKey
		// rename(2) replaces whatever the new name holds: the upload is no
		// longer conditional on the old name's base version.
		r.BaseVersion = ""
		if i == len(js)-1 && thenDelete != "" {
			r.ThenDelete = thenDelete
		}
		if j.failed {
			r.State = index.UploadPending
		}
		recs[i] = r
		if j.journaling || errors.Is(j.dropped, errCancelled) { // its Journal call records the new name; a deleted one's entry keeps its old name, to take down (overtaken.go)
			continue
		}
		if err := m.putUpload(j.seq, r); err != nil {
			for k := range i { // put the entries already moved back
				if !js[k].journaling && !errors.Is(js[k].dropped, errCancelled) {
					_ = m.putUpload(js[k].seq, js[k].rec)
				}
			}
			return Rekeyed{}, nil, err
		}
	}
	if len(landed) == 0 {
		delete(m.byKey, key)
	} else {
		m.byKey[key] = landed
	}
	live := false
	var away []*Job
	for i, j := range js {
		j.rec = recs[i]
		if j.failed { // the new name gets a fresh chance (old waiters keep the old verdict)
			nj := newJob(j.seq, j.rec, j.reserved)
			nj.content, j.content, nj.sent = j.content, nil, j.sent
			delete(m.jobs, j)
			m.jobs[nj] = struct{}{}
			js[i] = nj
			j = nj
		}
		if j.running {
			j.requeue = true
			m.hideLocked(j, key)
			if m.renamedAwayLocked(j) {
				away = append(away, j)
			}
			j.cancel()
		}
		live = live || j.dropped == nil
	}
	m.byKey[newKey] = append(m.byKey[newKey], js...)
	m.supersedeLocked(newKey)
	return Rekeyed{Moved: live, Unsent: unsent}, away, nil
}

// PendingUnder returns the keys under prefix that have an upload not yet
// complete, sorted.
func (m *Manager) PendingUnder(prefix string) []string {
	m.mu.Lock()
	var keys []string
	for k, js := range m.byKey {
		if len(js) > 0 && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	sort.Strings(keys)
	return keys
}

// Pending reports whether key has an upload not yet complete.
func (m *Manager) Pending(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey[key]) > 0
}

// WaitLanded waits for the uploads of key whose object is already in the
// bucket to settle (their namespace update done), the ones Rekey and
// Cancel cannot stop. It waits for nothing else.
func (m *Manager) WaitLanded(ctx context.Context, key string) error {
	m.mu.Lock()
	var js []*Job
	for _, j := range m.byKey[key] {
		if j.landed {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	return settled(ctx, js)
}

// WaitInFlight waits for the attempts under way that write key to end,
// stopped ones included: a stopped attempt whose last request was sent
// may still land there, and is then taken back down unless a file is
// being renamed to key (replacedLocked). A rename that copies a file
// over key server-side calls it after stopping key's uploads, so that
// neither the late object nor its take-down follows the copy.
func (m *Manager) WaitInFlight(ctx context.Context, key string) error {
	m.mu.Lock()
	if m.inFlight[key] == 0 {
		m.mu.Unlock()
		return nil
	}
	ch := m.flightEnded[key]
	if ch == nil {
		ch = make(chan struct{})
		m.flightEnded[key] = ch
	}
	m.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settled waits until every job in js is settled (done), or ctx ends.
func settled(ctx context.Context, js []*Job) error {
	for _, j := range js {
		select {
		case <-j.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// WaitKey waits for every upload of key committed so far; it returns the
// error of the one that failed, if any.
func (m *Manager) WaitKey(ctx context.Context, key string) error {
	m.mu.Lock()
	m.expediteLocked(key)
	js := append([]*Job(nil), m.byKey[key]...)
	m.mu.Unlock()
	m.kick()
	var first error
	for _, j := range js {
		if err := j.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// SyncDir is fsync(2) of the directory prefix: it makes the names under
// it as durable as a close is in this mode. Renames and deletions of
// files not yet uploaded are journal rewrites that are durable against a
// crash of the process only, so the journal is synced first (async mode
// promises no more: those uploads go up later, from the journal, after a
// crash of the machine too). In sync mode it then waits for every upload
// committed under prefix (a renamed file's, a retried one's), so that the
// bucket holds the directory as the calls left it; it returns the error
// of one that failed. Files still open for writing (held) are not waited
// for: their own close publishes them.
func (m *Manager) SyncDir(ctx context.Context, prefix string) error {
	if err := m.ix.Sync(); err != nil {
		return fmt.Errorf("writeback: sync the journal for %q: %w", prefix, err)
	}
	if m.opts.Mode != Sync {
		return nil
	}
	m.mu.Lock()
	var js []*Job
	for j := range m.jobs {
		if !j.held && j.dropped == nil && strings.HasPrefix(j.rec.Key, prefix) {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	var first error
	for _, j := range js {
		// A file deleted meanwhile is as the calls left it.
		if err := j.Wait(ctx); err != nil && !errors.Is(err, errCancelled) && first == nil {
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
	// TakingDown counts the take-downs under way (not failed): objects a
	// deleted or renamed file's upload left, still to be removed.
	TakingDown int `json:"taking_down,omitempty"`
}

// Summary reports pending and failed uploads now.
func (m *Manager) Summary() Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s Summary
	for j := range m.jobs {
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
	s.Failed = append(s.Failed, m.takeDownFailuresLocked()...)
	for t := range m.takeDowns {
		if !t.failed {
			s.TakingDown++
		}
	}
	sort.Slice(s.Failed, func(a, b int) bool { return s.Failed[a].Key < s.Failed[b].Key })
	return s
}
