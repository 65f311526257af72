package writeback

import (
	"os"
	"path/filepath"
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

// keptAlready reports whether the staged file named staging was set aside
// in failed-writes: a keep or discard whose journal entry was not deleted
// yet when the daemon stopped.
func (m *Manager) keptAlready(staging string) bool {
	_, err := os.Stat(filepath.Join(m.keptDir(), filepath.Base(staging)))
	return err == nil
}
