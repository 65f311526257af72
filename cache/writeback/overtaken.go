package writeback

import (
	"os"
	"path/filepath"

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
// stays), before any upload of that key. An attempt cut by the mount's
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

// overtakenJournaling is Job.overtakenSeq while journalRenamedAway
// appends the entry.
const overtakenJournaling = ^uint64(0)

// renamedAwayLocked reports whether running job j, renamed away, needs an
// entry to take down what its attempt may still land under the old name
// (see above), and marks it as being journaled. Once per job: later
// renames change nothing that attempt sends. Caller holds m.mu.
func (m *Manager) renamedAwayLocked(j *Job) bool {
	if j.seq == 0 || j.overtakenSeq != 0 {
		return false
	}
	j.overtakenSeq = overtakenJournaling
	return true
}

// journalRenamedAway appends, for each job renamedAwayLocked marked, an
// entry for the old name old, synced, with no lock held (a rare path: a
// rename during an upload's last request). If the attempt ended
// meanwhile (attemptEndedLocked, takeDownLater), the entry is not needed
// and goes at once.
func (m *Manager) journalRenamedAway(js []*Job, old string) {
	for _, j := range js {
		m.mu.Lock()
		r := j.rec
		m.mu.Unlock()
		r.Key, r.State, r.ThenDelete, r.ThenDeleteVersion = old, index.UploadOvertaken, "", ""
		seq, err := m.appendUpload(r)
		if err != nil {
			m.log.Error("writeback: journaling the take-down of a renamed file's old name failed; a crash before its upload ends may leave the old name", "key", old, "err", err)
		}
		m.mu.Lock()
		mine := j.overtakenSeq == overtakenJournaling
		switch {
		case mine && err == nil:
			j.overtakenSeq = seq
		case mine:
			j.overtakenSeq = 0
		case err == nil: // the attempt is over: nothing of it to take down any more
			m.deleteUpload(seq, old)
		}
		m.mu.Unlock()
	}
}

// attemptEndedLocked removes the entry journalRenamedAway made for j's
// attempt, now over (what it landed under the old name is down), unless
// the mount's end cut it; one still being appended goes when appended.
// Caller holds m.mu.
func (m *Manager) attemptEndedLocked(j *Job) {
	if j.overtakenSeq == 0 || m.ctx.Err() != nil {
		return
	}
	if j.overtakenSeq != overtakenJournaling {
		m.deleteUpload(j.overtakenSeq, j.rec.Key)
	}
	j.overtakenSeq = 0
}

// restoreOvertaken takes note of an UploadOvertaken entry at restore: its
// name is hidden, and held as an attempt's would be (inFlight: no upload
// of it starts), until takeDownOvertaken's take-down is done.
func (m *Manager) restoreOvertaken(seq uint64, r index.UploadRecord, kept bool) {
	m.overtaken = append(m.overtaken, overtakenUpload{seq: seq, rec: r, kept: kept})
	m.inFlight[r.Key]++ // before dispatch runs: no lock needed yet
	if m.names != nil {
		m.names.Hide(r.Key)
	}
}

// takeDownOvertaken starts the take-down of each entry restoreOvertaken
// noted, in the background (takedown.go): the uploads of other names do
// not wait for it. Each take-down that compares bytes gets its own link
// of the staged file first: a restored job may upload the same file (a
// renamed file's), and moves it into the cache when it lands, and two
// entries may share it (renamed, then deleted); the shared name then
// goes unless a job uploads it.
func (m *Manager) takeDownOvertaken() {
	linked, shared := map[string]bool{}, map[string]bool{}
	var ts []*takeDownJob
	for _, o := range m.overtaken {
		t := newTakeDown(o.seq, o.rec, m.names != nil) // the hold: restoreOvertaken
		switch {
		case o.rec.ThenDeleteVersion != "": // the version known: no bytes to compare
		case o.kept:
			t.path = filepath.Join(m.keptDir(), o.rec.Staging)
		default:
			t.path, t.owned = m.linkForTakeDown(o.seq, &t.rec)
			if t.owned {
				linked[o.rec.Staging] = true
			} else {
				shared[o.rec.Staging] = true // compared where it is
			}
		}
		ts = append(ts, t)
	}
	m.mu.Lock()
	for _, t := range ts {
		m.takeDowns[t] = struct{}{}
	}
	m.mu.Unlock()
	for name := range linked {
		if !shared[name] && !m.stagedFor(name) {
			os.Remove(filepath.Join(m.store.StagingDir(), name))
		}
	}
	for _, t := range ts {
		m.wg.Add(1)
		go m.runTakeDown(t, 0)
	}
	m.overtaken = nil
}

// linkForTakeDown links the staged file of r (entry seq) under a new
// name, journaled as r's, and returns its path, owned; on failure, the
// shared file's path, not owned.
func (m *Manager) linkForTakeDown(seq uint64, r *index.UploadRecord) (path string, owned bool) {
	shared := filepath.Join(m.store.StagingDir(), r.Staging)
	name := newStagingName()
	own := filepath.Join(m.store.StagingDir(), name)
	if err := os.Link(shared, own); err != nil {
		m.log.Warn("writeback: linking a staged file for a take-down failed; it compares with the shared file", "key", r.Key, "err", err)
		return shared, false
	}
	moved := *r
	moved.Staging = name
	if err := m.putUpload(seq, moved); err != nil {
		os.Remove(own)
		return shared, false
	}
	*r = moved
	return own, true
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
