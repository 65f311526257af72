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
	// hidden: the name is hidden (Names.Hide) until done.
	hidden bool
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
	var info backend.ObjectInfo
	if r.ThenDeleteVersion == "" {
		var same bool
		info, same, err = m.landedEarlier(ctx, r.Key, path, r.Size)
		if errors.Is(err, fs.ErrNotExist) {
			// The bytes to compare are gone (a kept copy removed by
			// hand): what is there cannot be recognised, and stays.
			m.log.Warn("writeback: the staged bytes of a take-down are gone; the object under its name is left as it is", "key", r.Key, "path", path)
			return false, other, nil
		}
		if err != nil || info.Key == "" { // failed, or nothing there
			return false, other, err
		}
		if !same {
			return false, info, nil
		}
		r.ThenDelete, r.ThenDeleteVersion = r.Key, info.Version
	} else {
		info, err = m.stat.Stat(ctx, r.Key)
		if errors.Is(err, backend.ErrNotExist) {
			return false, other, nil
		}
		if err != nil {
			return false, other, err
		}
		if info.Version != r.ThenDeleteVersion {
			return false, info, nil
		}
	}
	if err := m.del.Delete(ctx, r.Key); err != nil {
		return false, other, fmt.Errorf("writeback: take down %s: %w", r.Key, err)
	}
	return true, other, nil
}

// takeDownLater hands the take-down of what j's attempt r landed (at
// version), whose delete just failed, to runTakeDown. The entry now names
// the version, so that it needs no staged bytes (they go with a deleted
// file's job). The attempt's hold on the name (inFlight) and its hiding
// pass to the take-down: finish ends the attempt's own.
func (m *Manager) takeDownLater(j *Job, r index.UploadRecord, version string) {
	m.mu.Lock()
	var seq uint64
	switch {
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
	m.mu.Unlock()
	r.State, r.ThenDelete, r.ThenDeleteVersion = index.UploadOvertaken, r.Key, version
	if seq != 0 {
		_ = m.putUpload(seq, r) // logged; the retry runs all the same
	} else {
		var err error
		if seq, err = m.ix.AppendUpload(r); err != nil {
			m.log.Error("writeback: journaling the take-down of an overtaken upload failed; a crash before it is down leaves the object", "key", r.Key, "err", err)
		}
	}
	m.wg.Add(1)
	go m.runTakeDown(takeDownJob{seq: seq, rec: r, hidden: hidden}, m.opts.RetryMin)
}

// runTakeDown tries t after delay, then again with the uploads' backoff,
// at most a minute apart, until it is done (takeDownDone). The mount's
// end leaves its entry to the next mount.
func (m *Manager) runTakeDown(t takeDownJob, delay time.Duration) {
	defer m.wg.Done()
	for tries := 1; ; tries++ {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(delay):
		}
		known := t.rec.ThenDeleteVersion
		ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
		took, other, err := m.takeDown(ctx, &t.rec, t.path)
		cancel()
		if err == nil {
			m.takeDownDone(t, took, other, tries)
			return
		}
		if known == "" && t.rec.ThenDeleteVersion != "" && t.seq != 0 {
			_ = m.putUpload(t.seq, t.rec) // the version learned: the bytes are no longer needed
		}
		if tries == 1 {
			m.log.Warn("writeback: could not take down an upload overtaken by a rename or delete; retried in the background", "key", t.rec.Key, "err", err)
		} else {
			m.log.Debug("writeback: taking down an overtaken upload failed again", "key", t.rec.Key, "tries", tries, "err", err)
		}
		delay = min(max(2*delay, m.opts.RetryMin), m.opts.RetryMax, time.Minute)
	}
}

// takeDownDone ends take-down t: its entry and its own staged file go,
// its name shows again (another writer's object, other, at once), and
// the uploads of the name may start.
func (m *Manager) takeDownDone(t takeDownJob, took bool, other backend.ObjectInfo, tries int) {
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
	if t.hidden {
		m.names.Unhide(key) // records the name as gone
	}
	if other.Key != "" && m.names != nil { // another writer's object: shown at once, not after the TTL
		dir, name := meta.Parent(key)
		m.names.Upsert(dir, meta.Entry{Name: name, Size: other.Size, MTime: other.MTime.UnixNano(), Version: other.Version})
	}
	m.mu.Lock()
	m.flightDoneLocked(key)
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
