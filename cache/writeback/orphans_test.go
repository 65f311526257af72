package writeback

import (
	"testing"

	"github.com/stratafs/strata/cache/index"
)

// newPartsEnv is a sync-mode env on dir whose backend takes uploads in
// parts (so New sees b as its PartWriter).
func newPartsEnv(t *testing.T, b *partsBucket, dir string) *env {
	t.Helper()
	return openEnv(t, b, b.fakeBucket, dir, func(o *Options) { o.Mode = Sync })
}

func partsRecords(t *testing.T, ix *index.Index) int {
	t.Helper()
	n := 0
	if err := ix.ScanParts(func(uint64, index.PartsRecord, error) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEagerUploadLeftByACrashIsAborted: an eager upload's ID is recorded
// while it is open and forgotten once it is completed or aborted; one a
// crash left open (the mount gone without aborting it) is aborted by the
// next manager on the cache dir.
func TestEagerUploadLeftByACrashIsAborted(t *testing.T) {
	smallParts(t)
	b := newPartsBucket()
	dir := t.TempDir()
	e := newPartsEnv(t, b, dir)

	// Completed: no record left.
	st, err := e.m.NewStaging("done.pt")
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, st, make([]byte, 4*eagerPartSize), 0)
	waitFor(t, "parts sent", func() bool { _, s, _, _ := b.counts(); return s >= 1 })
	if n := partsRecords(t, e.m.ix); n != 1 {
		t.Fatalf("%d records of open uploads, want 1", n)
	}
	if _, err := e.m.Commit(t.Context(), "done.pt", st, "", 1); err != nil {
		t.Fatal(err)
	}
	if n := partsRecords(t, e.m.ix); n != 0 {
		t.Fatalf("%d records after the upload completed, want 0", n)
	}

	// Left open by a crash: the mount goes without aborting it.
	st, err = e.m.NewStaging("killed.pt")
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, st, make([]byte, 4*eagerPartSize), 0)
	waitFor(t, "the second upload begun", func() bool { begun, _, _, open := b.counts(); return begun == 2 && open == 1 })
	// And recorded: a kill -9 comes after the record (the mount aborts an
	// upload it could not record). Closing the index first made the record
	// fail and the upload be aborted then, once in a one-CPU run.
	waitFor(t, "the second upload recorded", func() bool { return partsRecords(t, e.m.ix) == 1 })
	e.m.eagerMu.Lock()
	clear(e.m.eagers) // what a kill -9 leaves: nobody aborts it
	e.m.eagerMu.Unlock()
	e.close()
	if _, _, aborted, open := b.counts(); aborted != 0 || open != 1 {
		t.Fatalf("before the restart: %d aborted, %d open; want 0, 1", aborted, open)
	}
	e2 := newPartsEnv(t, b, dir)
	waitFor(t, "the upload a crash left open aborted", func() bool { _, _, aborted, open := b.counts(); return aborted == 1 && open == 0 })
	waitFor(t, "its record forgotten", func() bool { return partsRecords(t, e2.m.ix) == 0 })
}
