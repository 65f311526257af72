package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
)

// What `strata uploads` shows and does: every upload the manager holds,
// with its state and last error; retry now; discard (the bytes are kept
// under the cache dir's failed-writes, never thrown away).

// Upload states.
const (
	StatePending   = "pending"      // waiting for a worker
	StateHeld      = "held"         // the file is still open (async): waits for its last close or fsync
	StateDelayed   = "delayed"      // closed (async): waits for --upload-delay of quiet in its directory
	StateUploading = "uploading"    // an attempt is running
	StateRetrying  = "retrying"     // an attempt failed; the next one is scheduled
	StateFailed    = "failed"       // failed for good (precondition, access denied, ...)
	StateNotUpload = "not uploaded" // a write that failed or whose writer was killed: kept, never uploaded
	// StateTakingDown: the object an upload landed after its file was
	// deleted or renamed is being removed from the old name (takedown.go).
	StateTakingDown = "taking down"
)

// Upload is one entry of the uploads listing.
type Upload struct {
	Key       string    `json:"key"`
	State     string    `json:"state"`
	Size      int64     `json:"size"`
	Attempts  int       `json:"attempts,omitempty"`
	Error     string    `json:"error,omitempty"`
	Committed time.Time `json:"committed,omitzero"`
	NextRetry time.Time `json:"next_retry,omitzero"`
	Copy      string    `json:"copy,omitempty"` // the staged or kept bytes
	// TakeDown: the row is a take-down (StateTakingDown, or StateFailed
	// for one the bucket refused), not an upload of the user's bytes.
	TakeDown bool `json:"take_down,omitempty"`
}

// Uploads lists every upload not complete, and every kept write, by key.
func (m *Manager) Uploads() []Upload {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Upload
	for j := range m.jobs {
		if j.dropped != nil {
			continue
		}
		u := Upload{
			Key: j.rec.Key, Size: j.rec.Size, Attempts: int(j.rec.Attempts), Error: j.rec.LastError,
			Committed: time.Unix(0, j.rec.Created), Copy: filepath.Join(m.store.StagingDir(), j.rec.Staging),
		}
		due := m.dueLocked(j)
		switch {
		case j.failed:
			u.State = StateFailed
		case j.running:
			u.State = StateUploading
		case j.held:
			u.State = StateHeld
		case j.tries > 0:
			u.State, u.NextRetry = StateRetrying, j.notBefore
		case due.After(time.Now()):
			u.State, u.NextRetry = StateDelayed, due
		default:
			u.State = StatePending
		}
		out = append(out, u)
	}
	out = append(out, m.takeDownsListedLocked()...)
	for _, k := range m.kept {
		out = append(out, Upload{Key: k.Key, State: StateNotUpload, Size: k.Size, Error: k.Error, Committed: time.Unix(0, k.Created), Copy: k.path})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Key != out[b].Key {
			return out[a].Key < out[b].Key
		}
		return out[a].Committed.Before(out[b].Committed)
	})
	return out
}

// ErrNoUpload: nothing to retry or discard under that key.
var ErrNoUpload = errors.New("no such upload")

// ErrNotRetryable: a kept write is not uploaded (its writer did not finish
// it); it can only be discarded (its bytes stay in failed-writes).
var ErrNotRetryable = errors.New("a write that failed or whose writer was killed is never uploaded; discard it (its bytes stay in failed-writes)")

// Retry starts key's waiting or failed uploads now ("" for every upload),
// except a held one, which still waits for its file's last close (it is
// expedited then). It returns how many it restarted or expedited.
func (m *Manager) Retry(key string) (int, error) {
	m.mu.Lock()
	n := 0
	for _, js := range m.byKey {
		for i, j := range js {
			if (key != "" && j.rec.Key != key) || j.dropped != nil {
				continue
			}
			if j.running || j.journaling { // being tried (or committed) right now
				n++
				continue
			}
			if j.failed { // settled for its waiters: a new job takes over
				r := j.rec
				r.State = index.UploadPending
				nj := newJob(j.seq, r, j.reserved)
				nj.content, j.content, nj.sent = j.content, nil, j.sent
				delete(m.jobs, j)
				m.jobs[nj] = struct{}{}
				js[i] = nj
				_ = m.putUpload(nj.seq, r)
				j = nj
			}
			if j.tries > 0 || !j.notBefore.IsZero() {
				j.tries, j.notBefore = 0, time.Time{}
			}
			// A held upload stays held: its file is still open for
			// writing (the kernel may be writing the very file it would
			// read), and it goes at the last close or an fsync. Started
			// now it would publish the file half written.
			j.expedite = true
			n++
		}
	}
	n += m.retryTakeDownsLocked(key)
	_, kept := m.kept[key]
	m.mu.Unlock()
	m.kick()
	switch {
	case n == 0 && kept:
		return 0, fmt.Errorf("%s: %w", key, ErrNotRetryable)
	case n == 0 && key != "":
		return 0, fmt.Errorf("%s: %w", key, ErrNoUpload)
	}
	m.log.Info("writeback: retrying now on request", "key", key, "uploads", n)
	return n, nil
}

// ErrLandedFirst: a discarded upload had already replaced the object in
// the bucket when the discard stopped it. The bucket keeps what landed
// (it cannot have the object before back), and the file reads as it.
var ErrLandedFirst = errors.New("the upload had reached the bucket before it could be stopped")

// Discard gives up key's uploads: nothing is uploaded, the file goes back
// to the bucket's version, and the staged bytes are moved to the cache
// dir's failed-writes (as a kept write is) rather than deleted. A kept
// write's record is dropped; its bytes stay there. It returns where the
// bytes are. An attempt under way is stopped and waited for: if it had
// landed already, the error wraps ErrLandedFirst (the copies are kept all
// the same). A name with no upload but a failed take-down (the object a
// deleted or renamed file's upload left, which the bucket refused to
// delete) has the take-down given up: the bucket keeps the object, and
// no copy is returned; one still being retried wraps ErrStillTakingDown.
func (m *Manager) Discard(ctx context.Context, key string) ([]string, error) {
	m.mu.Lock()
	var copies []string
	var stopped []*Job // attempts under way, stopped: they may have landed
	js := append([]*Job(nil), m.byKey[key]...)
	if len(js) > 0 {
		// The newest commit holds what the writer last closed; the older
		// ones it superseded are dropped as they would be anyway.
		last := js[len(js)-1]
		for _, j := range js {
			if j.journaling {
				m.mu.Unlock()
				return nil, fmt.Errorf("%s: being committed; try again", key)
			}
			if j.running { // superseded already or not: it may land
				stopped = append(stopped, j)
			}
		}
		for _, j := range js[:len(js)-1] {
			if j.running && (j.dropped == nil || errors.Is(j.dropped, errSuperseded)) {
				// Discarded as the newest is: what lands of it is taken
				// down, unless it replaced an object (see upload).
				j.dropped, j.discarded = errCancelled, true
				m.hideDiscardedLocked(j)
				j.cancel()
				if j.rec.BaseVersion == backend.VersionAbsent {
					m.journalOvertakenLocked(j) // as a delete's (dropOrCancelLocked)
				} else if j.seq != 0 { // what lands stays: nothing to take down
					m.deleteUpload(j.seq, j.rec.Key)
				}
				continue
			}
			m.dropOrCancelLocked(j, errSuperseded)
		}
		if p, err := m.setAsideLocked(last); err == nil {
			copies = append(copies, p)
		} else {
			m.mu.Unlock()
			return nil, err
		}
		if m.names != nil && !m.writingLocked(key) {
			dir, name := meta.Parent(key)
			m.names.ClearLocal(dir, name)
		}
	}
	var givenUp []*takeDownJob
	retrying := false
	if len(js) == 0 { // the name's upload, if it has one, is what is meant
		givenUp, retrying = m.discardTakeDownsLocked(key)
	}
	k := m.forgetKeptLocked(key)
	m.mu.Unlock()
	m.endDiscarded(givenUp)
	if k != nil {
		os.Remove(k.path + ".json") // the bytes stay
		copies = append(copies, k.path)
	}
	switch {
	case len(copies) == 0 && len(givenUp) > 0:
		return nil, nil
	case len(copies) == 0 && retrying:
		return nil, fmt.Errorf("%s: %w", key, ErrStillTakingDown)
	case len(copies) == 0:
		return nil, fmt.Errorf("%s: %w", key, ErrNoUpload)
	}
	m.log.Warn("writeback: upload discarded on request; the bytes are kept", "key", key, "copies", copies)
	for _, j := range stopped {
		_ = j.Wait(ctx) // stopped: ends as soon as its request does
		m.mu.Lock()
		landed := j.info.Version
		m.mu.Unlock()
		if landed != "" {
			m.log.Warn("writeback: a discarded upload had landed before it could be stopped; the bucket keeps it", "key", key, "version", landed)
			return copies, fmt.Errorf("%s: %w", key, ErrLandedFirst)
		}
	}
	return copies, nil
}

// setAsideLocked moves job j's staged file to failed-writes and drops the
// job (a running attempt is cancelled first; its file is moved all the
// same: the upload reads through its own descriptor, and what it may
// still complete is taken down as an overtaken upload). Caller holds m.mu.
func (m *Manager) setAsideLocked(j *Job) (string, error) {
	src := filepath.Join(m.store.StagingDir(), j.rec.Staging)
	dst := filepath.Join(m.keptDir(), j.rec.Staging)
	if err := os.MkdirAll(m.keptDir(), 0o700); err != nil {
		return "", fmt.Errorf("writeback: discard %s: %w", j.rec.Key, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return "", fmt.Errorf("writeback: discard %s: %w", j.rec.Key, err)
	}
	// Moved aside, still journaled: the next mount finds it kept.
	m.crashPoint()
	// As a delete: an upload that lands anyway is taken down, unless it
	// replaced an object (discarded: see upload).
	j.dropped, j.discarded = errCancelled, true
	if j.running {
		m.hideDiscardedLocked(j)
		j.cancel()
		if j.rec.BaseVersion == backend.VersionAbsent {
			// What lands is taken down, by the next mount too (overtaken.go),
			// which recognises it by the copy set aside.
			m.journalOvertakenLocked(j)
		}
	} else {
		m.dropLocked(j) // its os.Remove finds nothing: the bytes moved
	}
	return dst, nil
}
