package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// adoptBytes adopts data as version of state.json, as an upload's staged
// file becomes the cached copy of the version it created.
func adoptBytes(t *testing.T, s *Store, version string, data []byte) ObjectKey {
	t.Helper()
	k := ObjectKey{Source: "src", Key: "state.json", Version: version, Size: int64(len(data))}
	if err := os.MkdirAll(s.StagingDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.StagingDir(), version)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(k, p); err != nil {
		t.Fatal(err)
	}
	return k
}

// cachedWhole reports whether k is cached complete.
func cachedWhole(t *testing.T, s *Store, k ObjectKey) bool {
	t.Helper()
	o, err := s.Acquire(k)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	return o.Complete()
}

// TestReplacedVersionKeepsItsGraceWhenReplacedAgain: a version replaced,
// made current again (the same bytes saved again: the same ETag), and
// replaced once more, keeps the whole grace from its last replacement. The
// first replacement's timer retired it early: a reader that had just
// looked the file up fetched a version the bucket no longer had (ESTALE).
func TestReplacedVersionKeepsItsGraceWhenReplacedAgain(t *testing.T) {
	defer func(g time.Duration) { replacedGrace = g }(replacedGrace)
	replacedGrace = 400 * time.Millisecond
	s := openStore(t, t.TempDir(), testOpts())
	defer s.Close()
	v1 := []byte("the same state, saved twice")
	k1 := adoptBytes(t, s, "v1", v1)
	adoptBytes(t, s, "v2", []byte("another state")) // v1 replaced: its first timer
	time.Sleep(replacedGrace / 2)
	adoptBytes(t, s, "v1", v1)                         // current again
	adoptBytes(t, s, "v3", []byte("a third state"))    // v1 replaced again: a full grace from now
	time.Sleep(replacedGrace/2 + 100*time.Millisecond) // past the first timer only
	if !cachedWhole(t, s, k1) {
		t.Fatal("v1 was retired by the timer of its first replacement, before its grace from the second")
	}
}

// TestAcquireOfAnotherVersionKeepsTheCurrentForItsGrace: opening a version
// not cached (a newer one found in the bucket, or an older one a reader
// looked up before the replacement) does not retire the current one at
// once: a reader that looked it up a moment ago opens it next.
func TestAcquireOfAnotherVersionKeepsTheCurrentForItsGrace(t *testing.T) {
	defer func(g time.Duration) { replacedGrace = g }(replacedGrace)
	replacedGrace = 400 * time.Millisecond
	s := openStore(t, t.TempDir(), testOpts())
	defer s.Close()
	k1 := adoptBytes(t, s, "v1", []byte("the current version"))
	o2, err := s.Acquire(ObjectKey{Source: "src", Key: "state.json", Version: "v0", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	o2.Release()
	time.Sleep(replacedGrace / 4)
	if !cachedWhole(t, s, k1) {
		t.Fatal("the current version was retired at once when another version was opened")
	}
	time.Sleep(replacedGrace + 200*time.Millisecond)
	if cachedWhole(t, s, k1) {
		t.Fatal("the replaced version was never retired")
	}
}
