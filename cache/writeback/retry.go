package writeback

import (
	"context"
	"errors"
	"time"

	"github.com/stratafs/strata/backend"
)

// A failed upload waits before its next attempt, doubling from RetryMin
// up to RetryMax (5 minutes by default). That backoff is for a backend
// that keeps failing, not one that was down for a while: as soon as the
// backend answers again the waits end. While uploads wait, a cheap probe
// (a Stat of one waiting key) goes out every probeEvery; an answer, or
// any upload completing, resets every waiting upload's backoff and starts
// them now.

// probeEvery is how often a backend that failed uploads is probed.
func (m *Manager) probeEvery() time.Duration {
	return min(max(2*m.opts.RetryMin, 10*time.Millisecond), 5*time.Second)
}

// probeDueLocked starts a probe of the backend with key if one is due and
// none runs; else it returns when the next one is due (zero: one runs).
// Caller holds m.mu.
func (m *Manager) probeDueLocked(now time.Time, key string) time.Time {
	if m.probing || m.stat == nil {
		return time.Time{}
	}
	if due := m.lastProbe.Add(m.probeEvery()); due.After(now) {
		return due
	}
	m.probing, m.lastProbe = true, now
	m.wg.Add(1)
	go m.probe(key)
	return time.Time{}
}

// probe asks the backend about key; an answer (the object's attributes or
// a definite error) ends the backoff of every waiting upload.
func (m *Manager) probe(key string) {
	defer m.wg.Done()
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	_, err := m.stat.Stat(ctx, key)
	cancel()
	m.mu.Lock()
	m.probing = false
	if answered(err) {
		m.backendAnsweredLocked()
	}
	m.mu.Unlock()
	m.kick()
}

// answered reports whether err is the backend's own answer rather than a
// failure to reach it.
func answered(err error) bool {
	return err == nil || errors.Is(err, backend.ErrNotExist) || errors.Is(err, backend.ErrAccessDenied) ||
		errors.Is(err, backend.ErrNoBucket) || errors.Is(err, backend.ErrPreconditionFailed) ||
		errors.Is(err, backend.ErrVersionChanged) || errors.Is(err, backend.ErrInvalidRequest)
}

// backendAnsweredLocked ends the backoff of every waiting upload and
// take-down. Caller
// holds m.mu (and kicks the dispatcher after).
func (m *Manager) backendAnsweredLocked() {
	now := time.Now()
	n := 0
	for j := range m.jobs {
		if j.tries > 0 && !j.failed && !j.running {
			if j.notBefore.After(now) {
				n++
			}
			j.tries, j.notBefore = 0, time.Time{}
		}
	}
	for t := range m.takeDowns {
		if !t.failed {
			t.pokeNow()
		}
	}
	if n > 0 {
		m.log.Info("writeback: the backend answers again; retrying uploads now", "uploads", n)
	}
}
