package writeback

import "github.com/stratafs/strata/backend"

// A delete or a rename stops an upload in flight only up to its last
// request (the one-request put, the multipart completion, the resumable
// upload's last chunk): once that is sent, the attempt waits for the
// answer, and an object that landed under the name the file no longer
// has is taken back down (upload). Until then the bucket lists the old
// name, which the namespace must not show: a listing fetched meanwhile
// would bring back a deleted file, and `rm -rf` of its directory would
// find it not empty. So the name is hidden (Names.Hide) from the moment
// the delete or rename reaches the running job to the end of its attempt
// (finish), after the take-down, and before the key's next upload may
// start (flightEnded): Names.Unhide records the name as gone, which must
// not land after that upload's entry. A new file's upload discarded
// while in flight (Discard) is hidden the same way: what it lands is
// taken down too.

// hideLocked hides key, the name running job j's attempt may still put an
// object under, until the attempt ends. Once per job: a second delete or
// rename of it changes nothing the attempt sends. Caller holds m.mu.
func (m *Manager) hideLocked(j *Job, key string) {
	if m.names == nil || j.hidden != "" || j.attemptOver {
		return
	}
	j.hidden = key
	m.names.Hide(key)
}

// hideDiscardedLocked hides the key of a discarded job (Discard) whose
// attempt runs, if what it may still land is taken down: a new file's. One
// that replaced an object stays in the bucket (upload), the name's again.
// Caller holds m.mu.
func (m *Manager) hideDiscardedLocked(j *Job) {
	if j.running && j.rec.BaseVersion == backend.VersionAbsent {
		m.hideLocked(j, j.rec.Key)
	}
}

// endHiding ends j's hiding (hideLocked), its attempt over: nothing more
// of it can land, so nothing is hidden for it from now on (attemptOver,
// until its next attempt). Names.Unhide may write the index: it is called
// with no lock held.
func (m *Manager) endHiding(j *Job) {
	m.mu.Lock()
	key := j.hidden
	j.hidden, j.attemptOver = "", true
	m.mu.Unlock()
	if key != "" {
		m.names.Unhide(key)
	}
}
