package writeback

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/cache/index"
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
func (m *Manager) restoreOvertaken(seq uint64, r index.UploadRecord) {
	m.overtaken = append(m.overtaken, overtakenUpload{seq: seq, rec: r})
	if m.names != nil {
		m.names.Hide(r.Key)
	}
}

// takeDownOvertaken deals with the entries restoreOvertaken noted: the
// object is taken down if it is the staged bytes, then the entry and the
// staged file go. An entry whose check or delete fails (the backend out of
// reach) stays for the next mount. Runs before any upload of this mount.
func (m *Manager) takeDownOvertaken() {
	for _, o := range m.overtaken {
		r := o.rec
		path := filepath.Join(m.store.StagingDir(), r.Staging)
		ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
		_, same, err := m.landedEarlier(ctx, r.Key, path, r.Size)
		if err == nil && same && m.del != nil {
			if err = m.del.Delete(ctx, r.Key); err == nil {
				m.log.Info("writeback: took down the upload of a file deleted while it was in flight (the daemon had stopped before)", "key", r.Key)
			}
		}
		cancel()
		if err != nil {
			m.log.Warn("writeback: could not check or take down the upload of a file deleted while it was in flight; the next mount tries again", "key", r.Key, "err", err)
		} else {
			m.deleteUpload(o.seq, r.Key)
			if !m.stagedFor(r.Staging) { // a renamed file's: its upload reads it
				os.Remove(path)
			}
		}
		if m.names != nil {
			m.names.Unhide(r.Key)
		}
	}
	m.overtaken = nil
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
