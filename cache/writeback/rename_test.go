package writeback

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestRenameWhileWritingClearsTheLocalEntry: a file renamed while it is
// still being written, then committed and uploaded under its new name,
// leaves no local entry behind (its open write session moved with it:
// counting it against the new name forever kept the entry local).
func TestRenameWhileWritingClearsTheLocalEntry(t *testing.T) {
	e := newEnv(t, Sync, newBucket(), "")
	st, err := e.m.NewStaging("old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt([]byte("renamed while open"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rekey("old", "new", ""); err != nil {
		t.Fatal(err)
	}
	e.local.Store("new", true) // the filesystem shows it under its new name, local
	j, err := e.m.Commit(context.Background(), "new", st, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.bucket.get("new"); !ok {
		t.Fatal("not uploaded under the new name")
	}
	if _, local := e.local.Load("new"); local {
		t.Fatal("the uploaded file's entry is still local: its write session is counted under the new name forever")
	}
}

// TestSyncDirWaitsForRenamedUploads: fsync of a directory (SyncDir) in
// sync mode returns once the uploads under it are in the bucket: here a
// file whose upload failed, then renamed, is in the bucket under its new
// name when SyncDir returns. In async mode it returns with the upload
// still pending: the journal, synced, is its durability.
func TestSyncDirWaitsForRenamedUploads(t *testing.T) {
	b := newBucket()
	e := newEnv(t, Sync, b, "")
	b.setFail(backend.ErrUnavailable)
	data := []byte("written, failed, renamed, then fsync(dir)")
	if _, err := e.m.Commit(context.Background(), "d/tmp", e.stage(t, data), backend.VersionAbsent, 1); err == nil {
		t.Fatal("the upload succeeded against a failing bucket")
	}
	if _, err := e.m.Rekey("d/tmp", "d/final", ""); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		b.setFail(nil)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.m.SyncDir(ctx, "d/"); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if got, ok := b.get("d/final"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("SyncDir returned before the renamed file was in the bucket: %q %v", got, ok)
	}

	a := newEnv(t, Async, newBucket(), "")
	a.bucket.gate = make(chan struct{}) // no upload completes
	defer close(a.bucket.gate)
	if _, err := a.m.Commit(context.Background(), "d/x", a.stage(t, data), backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.m.SyncDir(ctx, "d/"); err != nil {
		t.Fatalf("async SyncDir: %v", err)
	}
	if !a.m.Pending("d/x") {
		t.Fatal("async SyncDir waited for the upload")
	}
}

// TestRekeyTellsWhetherTheOldKeyCanHoldAnything: a rename deletes the old
// name in the bucket unless Rekey says nothing of the file can be there:
// a file created over nothing whose upload never started. An upload that
// was tried (even one that failed: its request may have landed), a file
// based on a bucket version, and an upload restored from the journal
// after a restart (tried before the crash, perhaps) are not Unsent.
func TestRekeyTellsWhetherTheOldKeyCanHoldAnything(t *testing.T) {
	ctx := context.Background()
	b := newBucket()
	dir := t.TempDir()
	e := openEnv(t, b, b, dir, func(o *Options) { o.Mode, o.Delay = Async, time.Hour })
	for _, tc := range []struct {
		key, base  string
		wantUnsent bool
	}{
		{"created", backend.VersionAbsent, true},
		{"rewritten", "v1", false},
		{"unknown-base", "", false},
	} {
		if _, err := e.m.Commit(ctx, tc.key, e.stageAt(t, tc.key, []byte(tc.key)), tc.base, 1); err != nil {
			t.Fatal(err)
		}
		r, err := e.m.Rekey(tc.key, tc.key+"-renamed", "")
		if err != nil || !r.Moved || r.Unsent != tc.wantUnsent {
			t.Errorf("%s: Rekey %+v, %v; want moved, Unsent %v", tc.key, r, err, tc.wantUnsent)
		}
	}
	// Restored after a restart: it may have been tried before it.
	if _, err := e.m.Commit(ctx, "restored", e.stageAt(t, "restored", []byte("r")), backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	e.close()
	// Its upload restarts at boot; the bucket refuses it, so it is still
	// pending (not landed) when Rekey comes.
	b.setFail(backend.ErrUnavailable)
	e2 := openEnv(t, b, b, dir, func(o *Options) { o.Mode, o.Delay = Async, time.Hour })
	if r, err := e2.m.Rekey("restored", "restored-renamed", ""); err != nil || !r.Moved || r.Unsent {
		t.Errorf("restored: Rekey %+v, %v; want moved, not Unsent", r, err)
	}

	// Tried and failed: the request may have reached the bucket.
	s := newEnv(t, Sync, b, "")
	if _, err := s.m.Commit(ctx, "tried", s.stage(t, []byte("t")), backend.VersionAbsent, 1); err == nil {
		t.Fatal("the upload succeeded against a failing bucket")
	}
	if r, err := s.m.Rekey("tried", "tried-renamed", ""); err != nil || !r.Moved || r.Unsent {
		t.Errorf("tried: Rekey %+v, %v; want moved, not Unsent", r, err)
	}
}

// TestRenamedUploadInFlightHoldsItsOldKey: a file renamed while its
// upload is in flight under the old name (the object already in the
// bucket, the answer not back yet), and a new file created under the old
// name at once (a writer reusing its temporary name: write tmp, rename
// over the target, write tmp again). The first upload is taken back down
// from the old name when its answer comes: the new file's upload must
// wait for that, or it meets the first one's object (a create-only put
// refused: failed for good) and the delete then removes the name.
func TestRenamedUploadInFlightHoldsItsOldKey(t *testing.T) {
	ctx := context.Background()
	b := newBucket()
	b.landed = make(chan struct{})
	e := newEnv(t, Async, b, "")
	first, second := []byte("first file"), []byte("second file, same temporary name")
	if _, err := e.m.Commit(ctx, "tmp", e.stageAt(t, "tmp", first), backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	for b.puts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := e.m.Rekey("tmp", "target", ""); err != nil {
		t.Fatal(err)
	}
	j2, err := e.m.Commit(ctx, "tmp", e.stageAt(t, "tmp", second), backend.VersionAbsent, 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // time for a second upload to start, if it may
	close(b.landed)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := j2.Wait(wctx); err != nil {
		t.Fatalf("the new file's upload: %v", err)
	}
	if err := e.m.WaitKey(wctx, "target"); err != nil {
		t.Fatalf("the renamed file's upload: %v", err)
	}
	if got, ok := b.get("tmp"); !ok || !bytes.Equal(got, second) {
		t.Errorf("tmp = %q (present %v), want the second file", got, ok)
	}
	if got, ok := b.get("target"); !ok || !bytes.Equal(got, first) {
		t.Errorf("target = %q (present %v), want the first file", got, ok)
	}
}

// TestRenameOverAnUploadInFlightKeepsTheName: a file whose upload is in
// flight (its object already in the bucket, the answer not back) is
// replaced by a rename of a pending file over it (write-temporary-then-
// rename, while the previous version uploads). The overtaken upload used
// to be taken back down when its answer came, leaving the bucket without
// the name until the new file's upload landed: a reader of the bucket
// found no file where a rename over it should have kept one at every
// moment. The new upload replaces it instead, also when the overtaken
// one answers before the renamed file's upload is moved to the name (a
// rename under way: BeginMove).
func TestRenameOverAnUploadInFlightKeepsTheName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := newBucket()
	b.landed = make(chan struct{})
	e := openEnv(t, b, b, "", func(o *Options) { o.Mode, o.Delay = Async, time.Hour })
	old, repl := []byte("the version uploading"), []byte("the file renamed over it")
	j1, err := e.m.Commit(ctx, "state", e.stageAt(t, "state", old), backend.VersionAbsent, 1)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.m.WaitKey(ctx, "state") }() // an fsync: starts it now
	for b.puts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := e.m.Commit(ctx, "tmp", e.stageAt(t, "tmp", repl), backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	// The rename over it, as fs does it: journaled, the replaced file's
	// uploads cancelled, the renamed file's moved. The overtaken upload
	// answers between the two (the harder order: nothing waits under the
	// name yet), and is checked after both.
	mv, err := e.m.BeginMove("tmp", "state", false)
	if err != nil {
		t.Fatal(err)
	}
	e.m.Cancel("state")
	close(b.landed)
	_ = j1.Wait(ctx)
	if _, err := e.m.Rekey("tmp", "state", ""); err != nil {
		t.Fatal(err)
	}
	mv.Done()
	if got, ok := b.get("state"); !ok {
		t.Fatal("the bucket has no object under the name while the file renamed over it waits to upload")
	} else if !bytes.Equal(got, old) {
		t.Fatalf("state = %q before the new upload", got)
	}
	if err := e.m.WaitKey(ctx, "state"); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("state"); !ok || !bytes.Equal(got, repl) {
		t.Fatalf("state = %q (present %v), want the renamed file", got, ok)
	}
	if _, ok := b.get("tmp"); ok {
		t.Fatal("the temporary name reached the bucket")
	}
}

// TestDeleteTakesDownASupersededUploadThatLandsLate: a file closed twice
// in a row, its first upload in flight when the second close supersedes
// it, then deleted before that first upload's answer comes. The first
// upload, dropped as superseded, not as deleted, counted as landed when
// its answer came: the deleted name came back in the namespace (ls showed
// a file rm had removed, found by TestRandomCallsMatchLocalDisk with no
// upload delay), and in the bucket whenever it processed the put after
// the delete.
func TestDeleteTakesDownASupersededUploadThatLandsLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := newBucket()
	b.landed = make(chan struct{})
	e := newEnv(t, Async, b, "")
	j1, err := e.m.Commit(ctx, "k", e.stageAt(t, "k", nil), backend.VersionAbsent, 1)
	if err != nil {
		t.Fatal(err)
	}
	for b.puts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := e.m.Commit(ctx, "k", e.stageAt(t, "k", []byte("written after")), "", 2); err != nil {
		t.Fatal(err)
	}
	e.m.Cancel("k") // the unlink
	close(b.landed)
	_ = j1.Wait(ctx)
	if err := e.m.WaitKey(ctx, "k"); err != nil && !errors.Is(err, errCancelled) {
		t.Fatal(err)
	}
	if got, ok := b.get("k"); ok {
		t.Errorf("the bucket holds the deleted file: %q", got)
	}
	if _, ok := e.uploaded.Load("k"); ok {
		t.Error("the namespace shows the deleted file again")
	}
}

// TestADiscardTooLateKeepsWhatLanded: a rewrite of an object in the
// bucket, discarded while its upload's answer is on its way (the object
// already replaced). The discard took it for a delete: the upload that
// landed anyway was taken down, and with it the only copy the bucket had
// of the file, old or new. What landed stays (the bucket cannot have the
// old object back, and the file must not vanish for a discard), and
// Discard says so. A new file's upload is still taken down: nothing of
// it stays in the bucket. The same holds for an older upload, superseded
// by a second close before the discard: Discard did not wait for it, and
// said nothing reached the bucket while it landed.
func TestADiscardTooLateKeepsWhatLanded(t *testing.T) {
	for _, older := range []bool{false, true} {
		for _, rewrite := range []bool{true, false} {
			name := map[bool]string{true: "rewrite", false: "new file"}[rewrite] + map[bool]string{true: ", an older upload", false: ""}[older]
			t.Run(name, func(t *testing.T) { discardWhileLanding(t, rewrite, older) })
		}
	}
}

// discardWhileLanding commits k (over an object if rewrite), and again
// if older, and discards it while the first upload's object is in the
// bucket and its answer held back.
func discardWhileLanding(t *testing.T, rewrite, older bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := newBucket()
	base := backend.VersionAbsent
	if rewrite {
		b.objs["k"], b.vers["k"] = []byte("the object before"), "v0"
		base = "v0"
	}
	b.landed = make(chan struct{})
	e := newEnv(t, Async, b, "")
	j, err := e.m.Commit(ctx, "k", e.stageAt(t, "k", []byte("first")), base, 1)
	if err != nil {
		t.Fatal(err)
	}
	for b.puts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if older {
		if _, err := e.m.Commit(ctx, "k", e.stageAt(t, "k", []byte("second")), "", 2); err != nil {
			t.Fatal(err)
		}
	}
	go func() { // the answer comes once the discard has set the bytes aside
		for ctx.Err() == nil {
			if kept, _ := os.ReadDir(e.m.keptDir()); len(kept) > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(b.landed)
	}()
	copies, err := e.m.Discard(ctx, "k")
	if len(copies) != 1 {
		t.Errorf("Discard kept %q, want the newest staged bytes", copies)
	}
	_ = j.Wait(ctx)
	if !rewrite {
		if err != nil {
			t.Errorf("Discard: %v", err)
		}
		if got, ok := b.get("k"); ok {
			t.Errorf("the bucket holds the discarded new file: %q", got)
		}
		return
	}
	if !errors.Is(err, ErrLandedFirst) {
		t.Errorf("Discard: %v, want %v", err, ErrLandedFirst)
	}
	if got, ok := b.get("k"); !ok || string(got) != "first" {
		t.Errorf("the bucket holds %q (present: %v), want what landed", got, ok)
	}
	if info, ok := e.uploaded.Load("k"); !ok || info.(backend.ObjectInfo).Version != b.vers["k"] {
		t.Errorf("the namespace shows %v (present: %v), want the version that landed", info, ok)
	}
}
