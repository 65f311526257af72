package writeback

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
)

// A take-down (overtaken.go) that fails, the bucket refusing or not
// answering, is retried in the background until it is done or the mount
// ends, its journal entry kept meanwhile. Until it is done its name is
// held as an attempt's (inFlight): no upload of the name starts, and a
// rename over it waits (WaitInFlight). A new file saved under the name
// with the same bytes would otherwise meet the old object, take it for
// an earlier attempt of its own (same bytes, same ETag), and the retry
// would then remove it. The uploads of other names go on.

// takeDownJob is one take-down run by runTakeDown.
type takeDownJob struct {
	seq uint64 // its journal entry (0: none could be written)
	rec index.UploadRecord
	// path: the staged bytes to compare, while the version that landed
	// is not known; owned: path is the take-down's own, removed when done.
	path  string
	owned bool
	// poke: Retry and WaitAll ask for a try now.
	poke chan struct{}

	// Guarded by Manager.mu.
	// hidden: the name is hidden (Names.Hide) until done.
	hidden bool
	// failed: refused for good (permanent): not retried until Retry, its
	// name neither held nor hidden meanwhile.
	failed bool
	// discarded: given up on request (Discard), out of takeDowns.
	discarded bool
	tries     int
	lastErr   string
	next      time.Time // the next try, while retrying
	// settled: closed when the take-down is done or has failed, for
	// WaitAll; made anew when Retry restarts a failed one.
	settled chan struct{}
}

// newTakeDown is a take-down of r's object (entry seq), not yet in
// Manager.takeDowns; its name is hidden already when hidden.
func newTakeDown(seq uint64, r index.UploadRecord, hidden bool) *takeDownJob {
	return &takeDownJob{seq: seq, rec: r, hidden: hidden, poke: make(chan struct{}, 1), settled: make(chan struct{})}
}

// takeDown removes r.Key's object if it is the one an overtaken upload
// landed: of version r.ThenDeleteVersion when that is known, else holding
// exactly the staged bytes at path (r then records its version). It
// returns the object it found there (none: Key ""), and whether it
// removed it; an object it found and left is another writer's.
func (m *Manager) takeDown(ctx context.Context, r *index.UploadRecord, path string) (took bool, found backend.ObjectInfo, err error) {
	if m.del == nil || m.stat == nil {
		return false, found, nil
	}
	if r.ThenDeleteVersion == "" {
		var same bool
		found, same, err = m.landedEarlier(ctx, r.Key, path, r.Size)
		if errors.Is(err, fs.ErrNotExist) {
			// The bytes to compare are gone (a kept copy removed by
			// hand): what is there cannot be recognised, and stays.
			m.log.Warn("writeback: the staged bytes of a take-down are gone; the object under its name is left as it is", "key", r.Key, "path", path)
			return false, backend.ObjectInfo{}, nil
		}
		if err != nil || found.Key == "" || !same { // failed, nothing there, or another writer's
			return false, found, err
		}
		r.ThenDelete, r.ThenDeleteVersion = r.Key, found.Version
	} else {
		found, err = m.stat.Stat(ctx, r.Key)
		if errors.Is(err, backend.ErrNotExist) {
			return false, backend.ObjectInfo{}, nil
		}
		if err != nil || found.Version != r.ThenDeleteVersion {
			return false, found, err
		}
	}
	if err := m.del.Delete(ctx, r.Key); err != nil {
		return false, found, fmt.Errorf("writeback: take down %s: %w", r.Key, err)
	}
	return true, found, nil
}

// takeDownLater hands the take-down of what j's attempt r landed (at
// version), whose delete just failed (with failed), to runTakeDown. The entry now names
// the version, so that it needs no staged bytes (they go with a deleted
// file's job). The attempt's hold on the name (inFlight) and its hiding
// pass to the take-down: finish ends the attempt's own.
func (m *Manager) takeDownLater(j *Job, r index.UploadRecord, version string, failed error) {
	m.mu.Lock()
	var seq uint64
	switch {
	case j.overtakenSeq == overtakenJournaling: // its entry still being appended: goes when appended
		j.overtakenSeq = 0
	case j.overtakenSeq != 0: // renamed away from r.Key: that entry
		seq, j.overtakenSeq = j.overtakenSeq, 0
	case j.rec.State == index.UploadOvertaken && j.rec.Key == r.Key: // deleted: its own entry
		seq, j.seq = j.seq, 0 // dropLocked leaves the entry
	}
	hidden := j.hidden == r.Key
	if hidden {
		j.hidden = ""
	}
	m.inFlight[r.Key]++
	r.State, r.ThenDelete, r.ThenDeleteVersion = index.UploadOvertaken, r.Key, version
	t := newTakeDown(seq, r, hidden)
	t.tries, t.lastErr = 1, takeDownError(failed)
	m.takeDowns[t] = struct{}{} // before j settles: WaitAll finds it
	m.mu.Unlock()
	if seq != 0 {
		_ = m.putUpload(seq, r) // logged; the retry runs all the same
	} else if seq, err := m.appendUpload(r); err != nil {
		m.log.Error("writeback: journaling the take-down of an overtaken upload failed; a crash before it is down leaves the object", "key", r.Key, "err", err)
	} else {
		m.mu.Lock()
		t.seq = seq
		m.mu.Unlock()
	}
	m.wg.Add(1)
	go m.runTakeDown(t, min(m.opts.RetryMin, m.probeEvery()))
}

// pokeNow asks t's runTakeDown to try now (once, however often asked).
func (t *takeDownJob) pokeNow() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// runTakeDown tries t after delay, then again with the uploads' backoff
// but at most probeEvery apart (a try is one Stat and one DELETE, as
// cheap as that probe), until it is done (takeDownDone), or refused for
// good (takeDownFailed: then it waits for Retry). A poke (Retry, WaitAll,
// the backend answering again) ends the wait. The mount's end leaves its entry to the next mount.
func (m *Manager) runTakeDown(t *takeDownJob, delay time.Duration) {
	defer m.wg.Done()
	for tries := 1; ; tries++ {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(delay):
		case <-t.poke:
		}
		m.mu.Lock()
		seq, known := t.seq, t.rec.ThenDeleteVersion
		m.mu.Unlock()
		r := t.rec // its own copy: Uploads reads t.rec under m.mu
		ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
		took, found, err := m.takeDown(ctx, &r, t.path)
		cancel()
		m.mu.Lock()
		t.rec = r
		m.mu.Unlock()
		if err == nil {
			m.takeDownDone(t, took, found, tries)
			return
		}
		if known == "" && r.ThenDeleteVersion != "" && seq != 0 {
			_ = m.putUpload(seq, r) // the version learned: the bytes are no longer needed
		}
		if permanent(err) {
			if !m.takeDownFailed(t, found, err) {
				return
			}
			tries, delay = 0, 0 // retried on request
			continue
		}
		if tries == 1 {
			m.log.Warn("writeback: could not take down an upload overtaken by a rename or delete; retried in the background", "key", r.Key, "err", err)
		} else {
			m.log.Debug("writeback: taking down an overtaken upload failed again", "key", r.Key, "tries", tries, "err", err)
		}
		delay = min(max(2*delay, m.opts.RetryMin), m.opts.RetryMax, m.probeEvery())
		m.mu.Lock()
		t.tries++
		t.lastErr, t.next = takeDownError(err), time.Now().Add(delay)
		m.mu.Unlock()
	}
}

// takeDownDone ends take-down t: its entry and its own staged file go,
// its name shows again (another writer's object, found and left, at
// once), and the uploads of the name may start.
func (m *Manager) takeDownDone(t *takeDownJob, took bool, found backend.ObjectInfo, tries int) {
	key := t.rec.Key
	if took {
		m.log.Info("writeback: took down an upload overtaken by a rename or delete", "key", key, "tries", tries)
	}
	if t.seq != 0 {
		m.deleteUpload(t.seq, key)
	}
	if t.owned && !m.stagedFor(filepath.Base(t.path)) {
		os.Remove(t.path)
	}
	m.mu.Lock()
	hidden := t.hidden
	t.hidden = false
	m.mu.Unlock()
	if hidden {
		m.names.Unhide(key) // records the name as gone
	}
	if !took && found.Key != "" && m.names != nil { // another writer's object: shown at once, not after the TTL
		m.showObject(found)
	}
	m.mu.Lock()
	delete(m.takeDowns, t)
	close(t.settled)
	m.flightDoneLocked(key)
	if tries > 1 {
		m.backendAnsweredLocked() // the uploads waiting out a backoff need not
	}
	m.mu.Unlock()
	m.kick()
}

// flightDoneLocked ends one attempt, or take-down, holding key
// (inFlight). Caller holds m.mu.
func (m *Manager) flightDoneLocked(key string) {
	if m.inFlight[key]--; m.inFlight[key] <= 0 {
		delete(m.inFlight, key)
		if ch := m.flightEnded[key]; ch != nil {
			close(ch)
			delete(m.flightEnded, key)
		}
	}
}

// showObject lists the bucket's object info under its name now.
func (m *Manager) showObject(info backend.ObjectInfo) {
	dir, name := meta.Parent(info.Key)
	m.names.Upsert(dir, meta.Entry{Name: name, Size: info.Size, MTime: info.MTime.UnixNano(), Version: info.Version})
}
