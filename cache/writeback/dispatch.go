package writeback

import (
	"context"
	"time"
)

// dispatch starts runnable jobs: the oldest job of each key, within the
// concurrency limit, once its retry pause is over, and once no attempt
// of another job writes its key (one renamed from it mid-upload).
func (m *Manager) dispatch() {
	defer m.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		m.mu.Lock()
		now := time.Now()
		wakeAt := now.Add(time.Hour)
		for _, js := range m.byKey {
			if len(js) == 0 {
				continue
			}
			j := js[0]
			if j.running || j.failed || j.held || j.journaling || j.dropped != nil || m.inFlight[j.rec.Key] > 0 {
				continue
			}
			if due := m.dueLocked(j); due.After(now) {
				wakeAt = minTime(wakeAt, due)
				continue
			}
			if j.notBefore.After(now) {
				wakeAt = minTime(wakeAt, j.notBefore)
				if probe := m.probeDueLocked(now, j.rec.Key); !probe.IsZero() {
					wakeAt = minTime(wakeAt, probe)
				}
				continue
			}
			if m.running >= m.opts.Concurrency {
				break
			}
			ctx, cancel := context.WithCancel(m.ctx)
			j.running, j.cancel, j.sent, j.attemptOver = true, cancel, true, false
			m.running++
			m.inFlight[j.rec.Key]++
			m.wg.Add(1)
			go m.upload(ctx, j, j.rec)
		}
		if m.delayed() && len(m.dirs) > 0 {
			m.forgetQuietDirsLocked(now)
		}
		m.mu.Unlock()
		timer.Reset(time.Until(wakeAt))
		select {
		case <-m.ctx.Done():
			return
		case <-m.wake:
		case <-timer.C:
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
