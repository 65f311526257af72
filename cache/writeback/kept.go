package writeback

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A write that must not be uploaded (one of its writes failed, or its
// writer was killed halfway) is not thrown away either: its staged bytes
// may be the only copy of hours of work. Keep moves them to the cache
// dir's failed-writes directory (a rename: no space needed on a full
// disk), with a small JSON record beside them, and Summary reports them
// as failed until the file is written again or deleted. They no longer
// count against the cache size.

// keptDirName is the directory, beside staging, of kept copies.
const keptDirName = "failed-writes"

// keptWrite is one kept copy, as its JSON record says.
type keptWrite struct {
	Source  string `json:"source"`
	Key     string `json:"key"`
	Error   string `json:"error"`
	Size    int64  `json:"size"`
	Created int64  `json:"created"` // unix nanoseconds
	path    string // the staged bytes
}

func (m *Manager) keptDir() string {
	return filepath.Join(filepath.Dir(m.store.StagingDir()), keptDirName)
}

// Keep sets the staged file of key aside instead of uploading it, for why.
// A previous kept copy of key is replaced. The staging handle is closed.
func (m *Manager) Keep(key string, st *Staging, why error) {
	// The file's own size: one the kernel wrote by passthrough never
	// told the staging handle.
	size := st.Size()
	if s, _, err := fileState(st.f); err == nil {
		size = s
	}
	src := st.Path()
	st.untrack()
	_, reserved, eager := st.detach()
	eager.abortAsync()
	m.store.ReleaseStaging(reserved)
	m.keepPath(key, src, size, why)
}

// keepPath sets the staged file src (size bytes) of key aside.
func (m *Manager) keepPath(key, src string, size int64, why error) {
	dir := m.keptDir()
	dst := filepath.Join(dir, filepath.Base(src))
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.Rename(src, dst)
	}
	if err != nil {
		m.log.Error("writeback: could not keep the bytes of a write that was not uploaded", "key", key, "err", err)
		os.Remove(src)
		return
	}
	m.crashPoint()
	k := &keptWrite{Source: m.source, Key: key, Error: why.Error(), Size: size, Created: time.Now().UnixNano(), path: dst}
	if b, err := json.Marshal(k); err == nil {
		if err := os.WriteFile(dst+".json", b, 0o600); err != nil {
			// The copy stays; only a restart forgets what it was.
			m.log.Warn("writeback: recording a kept write", "key", key, "err", err)
		}
	}
	m.log.Error("writeback: not uploaded; what was written is kept", "key", key, "copy", dst, "bytes", size, "why", why)
	m.mu.Lock()
	old := m.kept[key]
	m.kept[key] = k
	m.mu.Unlock()
	old.remove()
}

// forgetKeptLocked drops key's kept copy: the file was written again
// whole, or deleted. Caller holds m.mu; the files go after it unlocks.
func (m *Manager) forgetKeptLocked(key string) *keptWrite {
	k := m.kept[key]
	delete(m.kept, key)
	return k
}

func (k *keptWrite) remove() {
	if k != nil {
		os.Remove(k.path)
		os.Remove(k.path + ".json")
	}
}

// loadKept finds the kept copies of earlier runs (of this source).
func (m *Manager) loadKept() {
	ents, _ := os.ReadDir(m.keptDir())
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.keptDir(), e.Name()))
		k := &keptWrite{path: filepath.Join(m.keptDir(), name)}
		if err != nil || json.Unmarshal(b, k) != nil || k.Source != m.source {
			continue // another source's (same cache dir): leave it
		}
		if _, err := os.Stat(k.path); err != nil {
			os.Remove(k.path + ".json")
			continue
		}
		if cur := m.kept[k.Key]; cur == nil || cur.Created < k.Created {
			m.kept[k.Key] = k
		}
	}
}

// keptFailures lists kept copies as failures. Caller holds m.mu.
func (m *Manager) keptFailuresLocked() []Failure {
	var fs []Failure
	for _, k := range m.kept {
		fs = append(fs, Failure{Key: k.Key, Error: "not uploaded: " + k.Error, Staging: k.path})
	}
	sort.Slice(fs, func(a, b int) bool { return fs[a].Key < fs[b].Key })
	return fs
}
