package writeback

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/meta"
)

// A file written by passthrough is written by the kernel, so whether it
// changed since the daemon last looked can only be read from its size and
// timestamps. That is sound where every change to a file gets a timestamp
// apart from the last one read (Linux 6.13+ "multigrain" timestamps on
// ext4, xfs, btrfs and tmpfs); on a filesystem with coarse timestamps two
// writes within one clock tick look alike. FineTimestamps tells which the
// staging directory has, and the filesystem skips an upload as redundant
// only where they are fine.

// fineProbeRounds is how many write-then-stat rounds the probe makes; a
// coarse clock ticks every 1-10 ms, far longer than these rounds take.
const fineProbeRounds = 64

// FineTimestamps reports whether a write to a staging file always
// changes the modification time fstat read just before it. Probed once;
// false if the probe fails.
func (m *Manager) FineTimestamps() bool {
	m.fineOnce.Do(func() {
		var err error
		if m.fine, err = probeFineTimestamps(m.store.StagingDir()); err != nil {
			m.log.Warn("writeback: probing the staging directory's timestamps; a close after an fsync uploads the file again", "err", err)
		}
	})
	return m.fine
}

func probeFineTimestamps(dir string) (bool, error) {
	f, err := os.CreateTemp(dir, ".timestamps-*")
	if err != nil {
		return false, fmt.Errorf("writeback: timestamp probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var before, after unix.Stat_t
	for i := range fineProbeRounds {
		if err := unix.Fstat(int(f.Fd()), &before); err != nil {
			return false, fmt.Errorf("writeback: timestamp probe: %w", err)
		}
		if _, err := f.WriteAt([]byte{byte(i)}, 0); err != nil {
			return false, fmt.Errorf("writeback: timestamp probe: %w", err)
		}
		if err := unix.Fstat(int(f.Fd()), &after); err != nil {
			return false, fmt.Errorf("writeback: timestamp probe: %w", err)
		}
		if after.Mtim == before.Mtim {
			return false, nil
		}
	}
	return true, nil
}

// EndUnchanged ends write session st with nothing to commit: the file
// holds what the key's last upload sent (a close after an fsync, with no
// write between). The staging file is deleted and, if nothing of the key
// is pending or being written, its name stops being local: the namespace
// holds the bucket's entry for it since that upload.
func (m *Manager) EndUnchanged(st *Staging) {
	m.mu.Lock()
	key := st.key
	m.mu.Unlock()
	st.Discard()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names != nil && len(m.byKey[key]) == 0 && !m.writingLocked(key) {
		dir, name := meta.Parent(key)
		m.names.ClearLocal(dir, name)
	}
}
