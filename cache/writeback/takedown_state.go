package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/backend"
)

// What the user sees of take-downs (takedown.go): `strata uploads` lists
// each one not done, `strata sync` waits for them as for uploads, and one
// the bucket refuses for good (credentials without delete rights, the
// bucket gone) fails, as an upload does, rather than being retried for
// ever: that would hold its name (every upload of it waiting) and keep
// sync waiting for a refusal no retry fixes.

// takeDownFailed records take-down t as refused for good (err): it is
// reported failed, its name is let go (uploads of it may start; the
// object stays in the bucket, shown under the name when found), and its
// journal entry stays for the next mount. It then waits for Retry (true)
// or the mount's end (false).
func (m *Manager) takeDownFailed(t *takeDownJob, found backend.ObjectInfo, err error) bool {
	key := t.rec.Key
	m.log.Error("writeback: could not take down an upload overtaken by a rename or delete, and it is not retried by itself; remove the object by hand, or fix the credentials and run strata uploads --retry", "key", key, "err", err)
	m.mu.Lock()
	show := t.hidden && found.Key != "" && m.names != nil
	if show {
		t.hidden = false // showObject's Upsert ends the hiding
	}
	m.mu.Unlock()
	if show { // before settled: sync returns with the name shown
		m.showObject(found)
	}
	m.mu.Lock()
	t.tries++
	t.failed, t.lastErr, t.next = true, takeDownError(err), time.Time{}
	close(t.settled)
	m.flightDoneLocked(key)
	m.mu.Unlock()
	m.kick()
	select {
	case <-m.ctx.Done():
		return false
	case <-t.poke:
		m.mu.Lock()
		defer m.mu.Unlock()
		return !t.discarded
	}
}

// ErrStillTakingDown: a discard asked of a take-down still being retried;
// it may yet succeed, and can be given up once it has failed.
var ErrStillTakingDown = errors.New("the object a deleted or renamed file's upload left is still being taken down; it can be discarded once strata uploads lists it failed")

// discardTakeDownsLocked gives up key's failed take-downs (`strata
// uploads --discard`): the object stays in the bucket, shown under the
// name already (takeDownFailed), and they leave the listing and the
// summary. It returns them, for endDiscarded once the caller has
// unlocked, and whether one is still being retried. Caller holds m.mu.
func (m *Manager) discardTakeDownsLocked(key string) (gone []*takeDownJob, retrying bool) {
	for t := range m.takeDowns {
		switch {
		case t.rec.Key != key:
		case t.failed:
			t.discarded = true
			delete(m.takeDowns, t)
			gone = append(gone, t)
		default:
			retrying = true
		}
	}
	return gone, retrying
}

// endDiscarded drops discarded take-downs' journal entries (the next
// mount leaves the object too) and their own staged bytes, and ends their
// goroutines.
func (m *Manager) endDiscarded(gone []*takeDownJob) {
	for _, t := range gone {
		if t.seq != 0 {
			m.deleteUpload(t.seq, t.rec.Key)
		}
		if t.owned && !m.stagedFor(filepath.Base(t.path)) {
			os.Remove(t.path)
		}
		t.pokeNow()
		m.log.Warn("writeback: gave up taking down the object a deleted or renamed file's upload left, on request; the bucket keeps it", "key", t.rec.Key)
	}
}

// takeDownError is how a take-down's failure reads in the listing (its
// state says it is a take-down).
func takeDownError(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// retryTakeDownsLocked asks key's take-downs ("" for all) to try now; a
// failed one takes its name again (held and hidden) first. It returns
// how many it asked. Caller holds m.mu.
func (m *Manager) retryTakeDownsLocked(key string) int {
	n := 0
	for t := range m.takeDowns {
		if key != "" && t.rec.Key != key {
			continue
		}
		if t.failed {
			t.failed, t.settled, t.tries = false, make(chan struct{}), 0
			m.inFlight[t.rec.Key]++
			if !t.hidden && m.names != nil {
				m.names.Hide(t.rec.Key)
				t.hidden = true
			}
		}
		t.pokeNow()
		n++
	}
	return n
}

// waitTakeDowns waits for the take-downs under way now (not the failed
// ones) to be done or to fail, asking each to try now.
func (m *Manager) waitTakeDowns(ctx context.Context) error {
	m.mu.Lock()
	var settling []chan struct{}
	for t := range m.takeDowns {
		if !t.failed {
			settling = append(settling, t.settled)
			t.pokeNow()
		}
	}
	m.mu.Unlock()
	for _, ch := range settling {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// takeDownsListedLocked is the uploads listing's part for take-downs.
// Caller holds m.mu.
func (m *Manager) takeDownsListedLocked() []Upload {
	var out []Upload
	for t := range m.takeDowns {
		u := Upload{Key: t.rec.Key, State: StateTakingDown, Size: t.rec.Size, Attempts: t.tries, Error: t.lastErr, TakeDown: true}
		if t.rec.Created != 0 {
			u.Committed = time.Unix(0, t.rec.Created)
		}
		if t.failed {
			u.State = StateFailed
		} else if t.next.After(time.Now()) {
			u.NextRetry = t.next
		}
		out = append(out, u)
	}
	return out
}

// takeDownFailuresLocked is the summary's part for take-downs. Caller
// holds m.mu.
func (m *Manager) takeDownFailuresLocked() []Failure {
	var out []Failure
	for t := range m.takeDowns {
		if t.failed {
			out = append(out, Failure{Key: t.rec.Key, Error: fmt.Sprintf("the object a deleted or renamed file's upload left could not be taken down: %s", t.lastErr)})
		}
	}
	return out
}
