package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
)

// errSuperseded ends a job whose file was committed again before it was
// uploaded: the newer content goes up instead.
var errSuperseded = errors.New("writeback: superseded by a newer write")

// errCancelled ends a job whose file was deleted before it was uploaded.
var errCancelled = errors.New("writeback: file deleted before upload")

// Job is one committed file on its way to the bucket.
type Job struct {
	seq      uint64
	reserved int64

	// Guarded by Manager.mu.
	rec     index.UploadRecord
	running bool
	cancel  context.CancelFunc
	dropped error // errSuperseded or errCancelled once decided
	// hidden: the key this job's running attempt may still put an object
	// under, though a delete or a rename took the name from the file
	// (hiding.go); "" when none.
	hidden  string
	requeue bool // renamed while running: start again under the new key
	// discarded: dropped by Discard (dropped is errCancelled), not by a
	// delete: an attempt that lands anyway over an object stays.
	discarded bool
	// landed: the attempt's object is in the bucket under rec.Key and the
	// job is settling; a rename can no longer move it (Rekey leaves it).
	landed bool
	held   bool // committed while the file is still open: waits for Unhold
	// sent: an attempt started (or the job was restored from the journal,
	// where one may have): its object may be under rec.Key.
	sent      bool
	failed    bool // permanent error; kept until written again or deleted
	notBefore time.Time
	// released: when the file's last close let the job go (async mode),
	// the start of its upload delay; expedite ends the delay (delay.go).
	released time.Time
	expedite bool
	tries    int // failed attempts since the backend last answered (the backoff)
	// content is what the file reads as until the upload is complete (the
	// job's hold, released when the job goes).
	content *Content
	// eager: the parts sent while the file was written (sync mode), taken
	// by the first upload attempt (eager.go).
	eager *eagerUpload
	// journaling: registered, not yet journaled (seq is 0): not started,
	// and the Journal call in progress cleans up if it is dropped.
	journaling bool
	// previous: the file before the session this job committed
	// (Staging.Previous). Set before the job is shared, never changed.
	previous meta.Entry
	// attemptOver: the running attempt's upload has returned (finish):
	// nothing more of it can land, nothing is hidden for it.
	attemptOver bool
	// overtakenSeq: the journal entry that takes the old name's object
	// down, should a kill -9 cut the attempt a rename overtook (0: none;
	// overtaken.go). Removed when that attempt ends.
	overtakenSeq uint64
	// successor: the newer commit that superseded this one, which holds
	// its bytes (staged from them) or replaced them; a sync close of
	// this one returns with that upload (commit.go, waitSuccessor).
	successor *Job

	once      sync.Once
	attempted chan struct{} // closed after the first attempt
	firstErr  error
	done      chan struct{} // closed when uploaded, dropped, or failed for good
	err       error
	info      backend.ObjectInfo
}

func newJob(seq uint64, r index.UploadRecord, reserved int64) *Job {
	if r.State == index.UploadFailed {
		r.State = index.UploadPending // a new mount tries once more
	}
	return &Job{seq: seq, rec: r, reserved: reserved, attempted: make(chan struct{}), done: make(chan struct{})}
}

// Previous is what the file was before the write session this job
// committed (Staging.Previous): a passthrough session that fails after a
// close committed it goes back there.
func (j *Job) Previous() meta.Entry { return j.previous }

// Landed returns the version the job's upload created, once the upload
// is complete; false while it is pending, or if it never landed.
func (j *Job) Landed() (string, bool) {
	if j == nil {
		return "", false
	}
	select {
	case <-j.done:
		return j.info.Version, j.err == nil && j.info.Version != ""
	default:
		return "", false
	}
}

// Wait blocks until the job is settled and returns its error (nil once the
// object is complete in the bucket).
func (j *Job) Wait(ctx context.Context) error {
	select {
	case <-j.done:
		if errors.Is(j.err, errSuperseded) {
			return nil
		}
		return j.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (j *Job) firstAttempt(err error) {
	j.once.Do(func() {
		j.firstErr = err
		close(j.attempted)
	})
}

// settle closes the job for good. Caller holds Manager.mu.
func (j *Job) settle(err error) {
	j.firstAttempt(err)
	select {
	case <-j.done:
	default:
		j.err = err
		close(j.done)
	}
}

// permanent reports errors no retry can fix: a conflict, refused
// credentials, no bucket, and a request the backend refuses as such
// (ErrInvalidRequest: a key it cannot store, say), which would otherwise
// be sent again every RetryMax for ever and keep sync waiting. The
// backends leave the 400s a new attempt can pass (a body damaged in
// transit) unclassified, so they are retried.
func permanent(err error) bool {
	return errors.Is(err, backend.ErrPreconditionFailed) || errors.Is(err, backend.ErrAccessDenied) ||
		errors.Is(err, backend.ErrNoBucket) || errors.Is(err, backend.ErrNotSupported) ||
		errors.Is(err, backend.ErrInvalidRequest)
}

// whatNow is the end of the log line of an upload that failed for good:
// what happened in words, and what the user can do.
func whatNow(err error) string {
	const cmds = "the file is kept: `strata uploads MOUNTPOINT` lists it, `--retry` sends it again, `--discard` gives it up"
	if errors.Is(err, backend.ErrPreconditionFailed) {
		return "the object changed in the bucket since this file was opened (another writer); " + cmds + ", and writing the file again replaces theirs"
	}
	return cmds
}

// upload runs one attempt of a job. stop, cancelled by j.cancel (a
// rename, a delete, a newer commit), gives the attempt up only before its
// last request is sent (backend.PutOptions.Stop); after that the attempt
// waits for the answer, so that an object that landed is known, and
// taken back down below: a cancelled request can still reach the bucket,
// and then nobody knew it was there. The mount's end (m.ctx) cuts
// everything: the job stays journaled, and the next mount finds what
// landed (confirm.go).
func (m *Manager) upload(stop context.Context, j *Job, r index.UploadRecord) {
	defer m.wg.Done()
	ctx := m.ctx
	path := filepath.Join(m.store.StagingDir(), r.Staging)
	m.mu.Lock()
	eager := j.eager
	j.eager = nil
	m.mu.Unlock()
	info, err := backend.ObjectInfo{}, errNoEager
	if eager != nil && eager.key == r.Key {
		var early int
		info, early, err = eager.finish(ctx, stop.Done(), r.Size, r.BaseVersion)
		if err == nil {
			m.log.Debug("writeback: uploaded in parts while written", "key", r.Key, "parts_before_close", early)
		}
	} else {
		eager.abort() // renamed since: the parts went up under the old name
	}
	if errors.Is(err, errNoEager) {
		if err != errNoEager { // a reason: it had begun
			m.log.Info("writeback: the parts sent while the file was written are given up; uploading it whole", "key", r.Key, "why", err)
		}
		var f *os.File
		if f, err = os.Open(path); err == nil {
			info, err = m.w.Put(ctx, r.Key, f, r.Size, backend.PutOptions{
				IfVersion: r.BaseVersion, PartSize: m.opts.PartSize, Concurrency: m.opts.PartConcurrency,
				Stop: stop.Done(),
			})
			f.Close()
		}
	}
	if errors.Is(err, backend.ErrPreconditionFailed) {
		if landed, same, cerr := m.landedEarlier(ctx, r.Key, path, r.Size); cerr == nil && same {
			m.log.Info("writeback: the bucket already holds this upload (an earlier attempt landed)", "key", r.Key)
			info, err = landed, nil
		}
	}
	if err == nil {
		m.mu.Lock()
		renamed, cancelled := j.requeue, errors.Is(j.dropped, errCancelled)
		// Discarded too late, over an object the bucket had: taking it
		// down would leave the file neither old nor new. It stays, and
		// the file reads as it (Discard reports ErrLandedFirst).
		tooLate := cancelled && j.discarded && !renamed && r.BaseVersion != backend.VersionAbsent
		j.landed = !renamed && !cancelled
		replaced := m.replacedLocked(r.Key, j)
		if tooLate {
			j.info = info
			m.landedLocked(r, info.Version)
		}
		m.mu.Unlock()
		if tooLate {
			if m.names != nil {
				dir, name := meta.Parent(r.Key)
				m.names.Upsert(dir, meta.Entry{Name: name, Size: r.Size, MTime: r.MTime, Version: info.Version})
			}
			err = context.Canceled
		} else if renamed || cancelled {
			// Renamed or deleted while the upload ran, and it landed
			// anyway: take it back down from the name it went up as,
			// unless another file was renamed to that name meanwhile:
			// its upload replaces this object, and the name is never
			// missing from the bucket in between (a rename over a file
			// is atomic for the bucket's other readers too).
			if m.del != nil && !replaced {
				if derr := m.del.Delete(m.ctx, r.Key); derr != nil {
					m.log.Warn("writeback: removing an upload overtaken by a rename or delete failed; retried in the background", "key", r.Key, "err", derr)
					m.takeDownLater(j, r, info.Version, derr)
				}
			}
			err = context.Canceled
		} else {
			// The object is whole in the bucket: a sync close returns now,
			// while the staged file becomes the cached copy. The uploads
			// that follow it are made conditional on its version before
			// its journal entry goes (complete): a kill -9 in between must
			// not leave them conditional on the version it replaced.
			j.firstAttempt(nil)
			m.mu.Lock()
			j.info = info // a rewrite committed from now on follows it too
			m.landedLocked(r, info.Version)
			m.mu.Unlock()
			if m.names != nil {
				// The bucket's entry first, while the job still stands for
				// the file: no lookup finds neither. And before its journal
				// entry goes (complete): killed in between, the next mount
				// resumes the upload, finds it landed and records it; the
				// other order left it listing the version before.
				dir, name := meta.Parent(r.Key)
				m.names.Upsert(dir, meta.Entry{Name: name, Size: r.Size, MTime: r.MTime, Version: info.Version})
			}
			m.crashPoint()
			err = m.complete(j, r, path, info)
		}
	}
	m.finish(j, r, info, err)
}

// replacedLocked reports whether a file is being renamed to key
// (BeginMove: its upload, or a server-side copy, will replace whatever
// object is there), or was: key has an upload, other than j, not
// conditional on anything the key holds (Rekey clears the condition). A
// new file's create-only upload does not count: the object must go
// first. Caller holds m.mu.
func (m *Manager) replacedLocked(key string, j *Job) bool {
	if m.moving[key] > 0 {
		return true
	}
	for _, k := range m.byKey[key] {
		if k != j && k.dropped == nil && k.rec.BaseVersion == "" {
			return true
		}
	}
	return false
}

// complete makes the uploaded file the cached copy of its new version and
// removes what the upload replaces.
func (m *Manager) complete(j *Job, r index.UploadRecord, path string, info backend.ObjectInfo) error {
	k := cache.ObjectKey{Source: m.source, Key: r.Key, Version: info.Version, Size: r.Size, MTime: r.MTime}
	if r.ThenDelete != "" && m.del != nil {
		if err := m.del.Delete(m.ctx, r.ThenDelete); err != nil {
			m.log.Warn("writeback: removing the old name after a rename", "key", r.ThenDelete, "err", err)
		}
	}
	// The journal entry goes before the staged file moves into the cache:
	// killed in between, the next mount finds a staging file no entry owns
	// and removes it (the upload is done). The other order left an entry
	// whose file had gone, reported at the next mount as a lost upload.
	m.deleteUpload(j.seq, r.Key)
	m.crashPoint()
	if err := m.store.Adopt(k, path); err != nil {
		// The object is up; only the local copy is lost.
		m.log.Warn("writeback: keeping the uploaded file as cached copy failed", "key", r.Key, "err", err)
		os.Remove(path)
		m.store.ReleaseStaging(j.reserved)
	}
	j.reserved = 0
	m.crashPoint()
	return nil
}

// putUpload rewrites a journal entry. A failure is logged: the entry keeps
// its previous state (the staged file stays), which a restart retries.
// Callers that can carry on without the journal entry ignore the result
// (`_ =`): the failure is logged here, and a restart finds the older entry.
func (m *Manager) putUpload(seq uint64, r index.UploadRecord) error {
	err := m.ix.PutUpload(seq, r)
	if err != nil {
		err = fmt.Errorf("writeback: journal %s: %w", r.Key, err)
		m.log.Error("writeback: updating the journal failed", "key", r.Key, "err", err)
	}
	return err
}

// deleteUpload removes a journal entry. A failure is logged: the next
// mount finds the entry, and drops it if its staged file is gone.
func (m *Manager) deleteUpload(seq uint64, key string) {
	if err := m.ix.DeleteUpload(seq); err != nil {
		m.log.Error("writeback: removing a journal entry failed; the next mount drops it", "key", key, "seq", seq, "err", err)
	}
}

// finish records an attempt's outcome.
func (m *Manager) finish(j *Job, r index.UploadRecord, info backend.ObjectInfo, err error) {
	m.endHiding(j) // what landed of it is down (upload); before flightEnded
	m.mu.Lock()
	m.attemptEndedLocked(j)
	j.running, j.landed = false, false
	j.cancel() // releases the attempt's stop (m.ctx keeps it until then)
	m.running--
	m.flightDoneLocked(r.Key)
	switch {
	case err == nil:
		// The file stops being local only if nothing newer of it is
		// committed or being written (the namespace already holds the
		// bucket's entry: see upload).
		if js := m.byKey[r.Key]; m.names != nil && len(js) == 1 && js[0] == j && !m.writingLocked(r.Key) {
			dir, name := meta.Parent(r.Key)
			m.names.ClearLocal(dir, name)
		}
		m.removeLocked(j)
		m.landedLocked(r, info.Version)
		j.info = info
		j.settle(nil)
		m.backendAnsweredLocked() // the others need not wait out their backoff
	case j.dropped != nil:
		m.dropLocked(j)
	case j.requeue:
		j.requeue = false // renamed mid-upload: go again under the new name
	case m.ctx.Err() != nil:
		j.firstAttempt(err) // shutting down: stays journaled for the next mount
	case permanent(err):
		j.failed = true
		j.rec.State, j.rec.LastError = index.UploadFailed, err.Error()
		j.rec.Attempts++
		_ = m.putUpload(j.seq, j.rec)
		m.log.Error("writeback: upload failed and is not retried by itself; "+whatNow(err), "key", r.Key, "err", err)
		j.settle(err)
	default:
		j.rec.Attempts++
		j.rec.LastError = err.Error()
		_ = m.putUpload(j.seq, j.rec)
		j.tries++
		pause := min(m.opts.RetryMin<<min(j.tries-1, 20), m.opts.RetryMax)
		j.notBefore = time.Now().Add(pause)
		m.log.Warn("writeback: upload failed; retrying", "key", r.Key, "attempt", j.rec.Attempts, "in", pause, "err", err)
		j.firstAttempt(err)
	}
	m.mu.Unlock()
	m.kick()
}
