package writeback

import (
	"errors"
	"os"
	"strings"
)

// In sync mode close() returns once the object is in the bucket, so the
// staged bytes are journaled (for a retry, a rename, a restart) without
// the fsync async mode pays before close returns. Such a journal entry
// carries the boot it was written on. A restart of the mount on the same
// boot finds every byte in the page cache and completes the upload; after
// a reboot (power loss, kernel crash) the bytes may be torn, and since
// the writer's close never returned they are kept aside, not uploaded.
// A first attempt that fails is different: close returns the error and
// promises the bytes are kept and retried, so they are flushed to disk
// and the entry trusted from then on (makeDurable).

// errUnflushedAtReboot is why a sync-mode upload cut short by a reboot
// is kept rather than uploaded.
var errUnflushedAtReboot = errors.New("the machine restarted while this file was uploading (--upload sync; its close had not returned): its bytes had not been flushed to disk and may be torn, so they were not uploaded")

// bootIDFile names the current boot of the machine.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// currentBoot returns the boot ID, or "" if it cannot be read (then every
// staged file is flushed before it is journaled, in both modes).
func currentBoot() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// makeDurable flushes the staged bytes of a sync-mode job whose first
// attempt failed and marks its journal entry as trusted after a reboot.
func (m *Manager) makeDurable(j *Job) {
	m.mu.Lock()
	c, key := j.content.Acquire(), j.rec.Key
	m.mu.Unlock()
	if c == nil { // settled or dropped meanwhile
		return
	}
	err := c.f.Sync()
	c.Release()
	if err != nil {
		m.log.Error("writeback: flushing the staged bytes of a failed upload; a reboot before it completes keeps them aside", "key", key, "err", err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, live := m.jobs[j]; !live || m.closed || j.rec.UnsyncedBoot == "" {
		return
	}
	j.rec.UnsyncedBoot = ""
	_ = m.putUpload(j.seq, j.rec)
}
