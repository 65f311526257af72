package writeback

import (
	"time"

	"github.com/stratafs/strata/cache/meta"
)

// The upload delay (async mode, Options.Delay): an upload starts once its
// file has been closed for the delay and its directory has been quiet as
// long: no write session open in it, none opened or closed, nothing
// committed or renamed into it. A program that writes a set of files and
// then renames their directory (the Hugging Face Trainer's
// tmp-checkpoint-N, renamed to checkpoint-N once every file is written)
// thus renames staged files, and the bucket never holds the temporary
// names nor pays a server-side copy of them. A directory written without
// a pause holds its uploads at most delayCap times the delay after their
// close. fsync (WaitKey), strata sync and unmount (WaitAll) and Retry
// start them at once; uploads resumed after a restart start at once.

// delayCap bounds the hold of a busy directory, in delays.
const delayCap = 12

// dirActivity is what the delay knows of one directory.
type dirActivity struct {
	writers int       // write sessions open on files of the directory
	last    time.Time // the last session opened or closed, commit, or rename into it
}

// touchLocked records activity in key's directory: a write session opened
// (writers +1), closed (-1), or a commit or rename (0). Caller holds m.mu.
func (m *Manager) touchLocked(key string, writers int, now time.Time) {
	if !m.delayed() {
		return
	}
	dir, _ := meta.Parent(key)
	a := m.dirs[dir]
	if a == nil {
		a = &dirActivity{}
		m.dirs[dir] = a
	}
	a.writers = max(a.writers+writers, 0)
	a.last = now
}

// delayed reports whether uploads wait for a quiet directory.
func (m *Manager) delayed() bool { return m.opts.Mode == Async && m.opts.Delay > 0 }

// dueLocked is when job j may start as far as the delay goes (zero: now).
// Caller holds m.mu.
func (m *Manager) dueLocked(j *Job) time.Time {
	if !m.delayed() || j.expedite || j.released.IsZero() {
		return time.Time{}
	}
	d := m.opts.Delay
	due, limit := j.released.Add(d), j.released.Add(delayCap*d)
	dir, _ := meta.Parent(j.rec.Key)
	if a := m.dirs[dir]; a != nil {
		if a.writers > 0 {
			return limit
		}
		if q := a.last.Add(d); q.After(due) {
			due = q
		}
	}
	return minTime(due, limit)
}

// expediteLocked ends the delay of key's uploads ("" for every upload).
// Caller holds m.mu (and kicks the dispatcher after).
func (m *Manager) expediteLocked(key string) {
	if key != "" {
		for _, j := range m.byKey[key] {
			j.expedite = true
		}
		return
	}
	for _, js := range m.byKey {
		for _, j := range js {
			j.expedite = j.expedite || !j.held // strata sync leaves files still open alone
		}
	}
}

// forgetQuietDirsLocked drops the activity of directories with no writer
// whose last activity is too old to hold any upload. Caller holds m.mu.
func (m *Manager) forgetQuietDirsLocked(now time.Time) {
	old := now.Add(-delayCap * m.opts.Delay)
	for dir, a := range m.dirs {
		if a.writers == 0 && a.last.Before(old) {
			delete(m.dirs, dir)
		}
	}
}
