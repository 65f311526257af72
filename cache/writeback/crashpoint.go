package writeback

import (
	"os"
	"path/filepath"

	"github.com/stratafs/strata/cache/index"
)

// A journal entry and its staged file end in two steps (the entry is
// deleted, the file moves or goes), and a kill -9 can fall between them.
// The order is chosen so that the next mount never finds an entry whose
// bytes are nowhere: the entry goes first when the bytes are no longer
// needed (an upload that completed, a dropped job), and last when the
// bytes move aside to be kept (failed-writes), where the next mount finds
// them (keptAlready). crashPoint marks each point in between, so a test
// can check at every one what a restart would find.

// crashTestHook is set by tests only, before a manager starts.
var crashTestHook func(*Manager)

func (m *Manager) crashPoint() {
	if h := crashTestHook; h != nil {
		h(m)
	}
}

// appendTestHook, set by tests only, runs before each synced journal
// append (appendUpload) with the record appended.
var appendTestHook func(index.UploadRecord)

// appendUpload appends r to the journal, synced. It is disk I/O: never
// called with m.mu held.
func (m *Manager) appendUpload(r index.UploadRecord) (uint64, error) {
	if h := appendTestHook; h != nil {
		h(r)
	}
	return m.ix.AppendUpload(r)
}

// keptAlready reports whether the staged file named staging was set aside
// in failed-writes: a keep or discard whose journal entry was not deleted
// yet when the daemon stopped.
func (m *Manager) keptAlready(staging string) bool {
	_, err := os.Stat(filepath.Join(m.keptDir(), filepath.Base(staging)))
	return err == nil
}
