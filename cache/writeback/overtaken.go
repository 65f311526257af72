package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
)

// A file deleted or renamed while an attempt of its upload is in flight
// (the last request sent, its answer not back) can still land in the
// bucket: the attempt then takes the object back down (upload). A kill -9
// before that leaves the object, and the name, in the bucket for good
// unless the journal still says so. So a deleted file's entry is not
// removed at the delete but marked UploadOvertaken, and removed when the
// attempt ends (dropLocked); a rename, whose entry now uploads the new
// name, adds one such entry for the old name, of the same staged file
// (attemptEndedLocked removes it). A next mount that finds such an entry
// uploads nothing for it and takes the key's object down if it holds
// exactly the staged bytes (another writer's object of the name, since,
// stays), before any upload of that mount. An attempt cut by the mount's
// end leaves its entry to the next mount: its last request may land yet.

// overtakenUpload is an UploadOvertaken journal entry found by restore.
type overtakenUpload struct {
	seq uint64
	rec index.UploadRecord
	// kept: the staged bytes are the copy a discard set aside in
	// failed-writes (Discard), the user's to keep: compared, not removed.
	kept bool
}

// journalOvertakenLocked marks the entry of running job j, which a delete
// overtook, as one to take down (see above). Caller holds m.mu.
func (m *Manager) journalOvertakenLocked(j *Job) {
	if j.seq == 0 || j.rec.State == index.UploadOvertaken {
		return
	}
	j.rec.State = index.UploadOvertaken
	_ = m.putUpload(j.seq, j.rec)
}

// journalRenamedAwayLocked journals, for running job j renamed from old,
// an entry to take down what its attempt may still land under old (see
// above). Once per job: later renames change nothing that attempt sends.
// The entry is synced (a rare path: a rename during an upload's last
// request). Caller holds m.mu.
func (m *Manager) journalRenamedAwayLocked(j *Job, old string) {
	if j.seq == 0 || j.overtakenSeq != 0 {
		return
	}
	r := j.rec
	r.Key, r.State, r.ThenDelete, r.ThenDeleteVersion = old, index.UploadOvertaken, "", ""
	seq, err := m.ix.AppendUpload(r)
	if err != nil {
		m.log.Error("writeback: journaling the take-down of a renamed file's old name failed; a crash before its upload ends may leave the old name", "key", old, "err", err)
		return
	}
	j.overtakenSeq = seq
}

// attemptEndedLocked removes the entry journalRenamedAwayLocked made for
// j's attempt, now over (what it landed under the old name is down),
// unless the mount's end cut it. Caller holds m.mu.
func (m *Manager) attemptEndedLocked(j *Job) {
	if j.overtakenSeq == 0 || m.ctx.Err() != nil {
		return
	}
	m.deleteUpload(j.overtakenSeq, j.rec.Key)
	j.overtakenSeq = 0
}

// restoreOvertaken takes note of an UploadOvertaken entry at restore: its
// name is hidden until takeDownOvertaken has dealt with it.
func (m *Manager) restoreOvertaken(seq uint64, r index.UploadRecord, kept bool) {
	m.overtaken = append(m.overtaken, overtakenUpload{seq: seq, rec: r, kept: kept})
	if m.names != nil {
		m.names.Hide(r.Key)
	}
}

// takeDownOvertaken deals with the entries restoreOvertaken noted: the
// object is taken down if it is the one the entry names, then the entry
// and the staged file go. An entry whose check or delete fails (the
// backend out of reach) stays: retried in the background once the
// object's version is known, else left to the next mount. Runs before any
// upload of this mount.
func (m *Manager) takeDownOvertaken() {
	for _, o := range m.overtaken {
		r := o.rec
		path := filepath.Join(m.store.StagingDir(), r.Staging)
		if o.kept {
			path = filepath.Join(m.keptDir(), r.Staging)
		}
		known := r.ThenDeleteVersion
		ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
		took, other, err := m.takeDown(ctx, &r, path)
		cancel()
		switch {
		case err == nil:
			if took {
				m.log.Info("writeback: took down the upload of a file deleted or renamed while it was in flight (the daemon had stopped before)", "key", r.Key)
			}
			m.deleteUpload(o.seq, r.Key)
			if !o.kept && !m.stagedFor(r.Staging) { // a renamed file's: its upload reads it
				os.Remove(path)
			}
		case r.ThenDeleteVersion != "":
			if known == "" { // learned by the check: the staged bytes are no longer needed
				_ = m.putUpload(o.seq, r)
			}
			m.log.Warn("writeback: could not take down the upload of a file deleted or renamed while it was in flight; retried in the background", "key", r.Key, "err", err)
			m.wg.Add(1)
			go m.retryTakeDown(o.seq, r)
		default:
			m.log.Warn("writeback: could not check or take down the upload of a file deleted or renamed while it was in flight; the next mount tries again", "key", r.Key, "err", err)
		}
		if m.names != nil {
			m.names.Unhide(r.Key) // records the name as gone
			if other.Key != "" {  // another writer's object: shown again at once, not after the TTL
				dir, name := meta.Parent(r.Key)
				m.names.Upsert(dir, meta.Entry{Name: name, Size: other.Size, MTime: other.MTime.UnixNano(), Version: other.Version})
			}
		}
	}
	m.overtaken = nil
}

// takeDown removes r.Key's object if it is the one an overtaken upload
// landed: of version r.ThenDeleteVersion when that is known, else holding
// exactly the staged bytes at path (r then records its version). Another
// writer's object of the name stays, and is returned as other. It
// reports whether it removed the object.
func (m *Manager) takeDown(ctx context.Context, r *index.UploadRecord, path string) (took bool, other backend.ObjectInfo, err error) {
	if m.del == nil || m.stat == nil {
		return false, other, nil
	}
	if r.ThenDeleteVersion == "" {
		info, same, err := m.landedEarlier(ctx, r.Key, path, r.Size)
		if err != nil {
			return false, other, err
		}
		if same {
			r.ThenDelete, r.ThenDeleteVersion = r.Key, info.Version
		}
	}
	info, err := m.stat.Stat(ctx, r.Key)
	if errors.Is(err, backend.ErrNotExist) {
		return false, other, nil
	}
	if err != nil {
		return false, other, err
	}
	if info.Version != r.ThenDeleteVersion {
		return false, info, nil
	}
	if err := m.del.Delete(ctx, r.Key); err != nil {
		return false, other, fmt.Errorf("writeback: take down %s: %w", r.Key, err)
	}
	return true, other, nil
}

// takeDownLater hands the take-down of what j's attempt r landed (at
// version), whose delete just failed, to retryTakeDown. The entry names
// the version, so that it needs no staged bytes (they go with a deleted
// file's job), and stays journaled until the object is down: the mount's
// end leaves it to the next mount.
func (m *Manager) takeDownLater(j *Job, r index.UploadRecord, version string) {
	m.mu.Lock()
	var seq uint64
	switch {
	case j.overtakenSeq != 0: // renamed away from r.Key: that entry
		seq, j.overtakenSeq = j.overtakenSeq, 0
	case j.rec.State == index.UploadOvertaken && j.rec.Key == r.Key: // deleted: its own entry
		seq, j.seq = j.seq, 0 // dropLocked leaves the entry
	}
	m.mu.Unlock()
	r.State, r.ThenDelete, r.ThenDeleteVersion = index.UploadOvertaken, r.Key, version
	var err error
	if seq != 0 {
		err = m.putUpload(seq, r)
	} else if seq, err = m.ix.AppendUpload(r); err != nil {
		m.log.Error("writeback: journaling the take-down of an overtaken upload failed; a crash before it is down leaves the object", "key", r.Key, "err", err)
	}
	_ = err // logged; the retry runs all the same
	m.wg.Add(1)
	go m.retryTakeDown(seq, r)
}

// retryTakeDown retries the take-down of r (takeDown, its version known)
// with the uploads' backoff, at most a minute apart, until it is done,
// then removes its journal entry seq (0: none). The mount's end leaves
// the entry to the next mount.
func (m *Manager) retryTakeDown(seq uint64, r index.UploadRecord) {
	defer m.wg.Done()
	for delay, tries := m.opts.RetryMin, 1; ; delay, tries = min(2*delay, m.opts.RetryMax, time.Minute), tries+1 {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(delay):
		}
		ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
		took, _, err := m.takeDown(ctx, &r, "")
		cancel()
		if err != nil {
			m.log.Debug("writeback: taking down an overtaken upload failed again", "key", r.Key, "tries", tries, "err", err)
			continue
		}
		if took {
			m.log.Info("writeback: took down an overtaken upload", "key", r.Key, "tries", tries+1)
		}
		if seq != 0 {
			m.deleteUpload(seq, r.Key)
		}
		if r.Staging != "" && !m.stagedFor(r.Staging) { // left by a crash (restore); a job's moves into the cache
			os.Remove(filepath.Join(m.store.StagingDir(), r.Staging))
		}
		return
	}
}

// stagedFor reports whether a restored job uploads the staged file named
// staging.
func (m *Manager) stagedFor(staging string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for j := range m.jobs {
		if j.rec.Staging == staging {
			return true
		}
	}
	return false
}
