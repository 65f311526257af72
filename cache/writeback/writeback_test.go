package writeback

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
)

type env struct {
	store    *cache.Store
	bucket   *fakeBucket
	m        *Manager
	dir      string
	uploaded sync.Map      // key -> backend.ObjectInfo (Version only)
	pending  sync.Map      // key -> size
	local    sync.Map      // key -> true while shown as local
	hidden   sync.Map      // key -> true while hidden (Names.Hide)
	upserted chan struct{} // if set, Upsert waits for it
	// unhiding, if set, receives every Unhide's key, which then waits
	// for unhidden.
	unhiding chan string
	unhidden chan struct{}
	hides    atomic.Int64 // Hide calls
}

// fakeNames records what the manager tells the namespace.
type fakeNames struct{ e *env }

func (f *fakeNames) SetLocal(dir string, e meta.Entry) {
	f.e.pending.Store(dir+e.Name, e.Size)
	f.e.local.Store(dir+e.Name, true)
}
func (f *fakeNames) ClearLocal(dir, name string) { f.e.local.Delete(dir + name) }
func (f *fakeNames) Hide(key string)             { f.e.hides.Add(1); f.e.hidden.Store(key, true) }
func (f *fakeNames) Unhide(key string) {
	if f.e.unhiding != nil {
		f.e.unhiding <- key
		<-f.e.unhidden
	}
	f.e.hidden.Delete(key)
}
func (f *fakeNames) Upsert(dir string, e meta.Entry) {
	if f.e.upserted != nil {
		<-f.e.upserted
	}
	f.e.hidden.Delete(dir + e.Name) // as meta.Cache: the name's object ends the hiding
	f.e.uploaded.Store(dir+e.Name, backend.ObjectInfo{Version: e.Version, Size: e.Size})
}

func openStore(t *testing.T, dir string, maxBytes int64) *cache.Store {
	t.Helper()
	eng, _ := uring.New(uring.KindPread, uring.DefaultOptions())
	o := cache.DefaultOptions()
	o.BlockSize, o.Engine, o.MaxBytes, o.MinFree = 64<<10, eng, maxBytes, 0
	s, err := cache.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newEnv(t *testing.T, mode Mode, b *fakeBucket, dir string) *env {
	t.Helper()
	return openEnv(t, b, b, dir, func(o *Options) { o.Mode = mode })
}

// openEnv starts a manager of be (whose objects fb holds) on a store in
// dir (new if ""), with quick retries, no upload delay, and set's changes.
func openEnv(t *testing.T, be backend.Backend, fb *fakeBucket, dir string, set func(*Options)) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e := &env{store: openStore(t, dir, 1<<30), bucket: fb, dir: dir}
	o := DefaultOptions()
	o.RetryMin, o.RetryMax, o.Delay = 10*time.Millisecond, 50*time.Millisecond, 0
	set(&o)
	m, err := New(e.store, be, o, &fakeNames{e: e})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(e.close)
	return e
}

// newEnvHoldingUpserts is an async env whose namespace updates (Upsert)
// wait until e.upserted is closed: an upload stays landed, not settled.
func newEnvHoldingUpserts(t *testing.T, b *fakeBucket) *env {
	t.Helper()
	e := newEnv(t, Async, b, "")
	e.upserted = make(chan struct{}) // before any commit: nothing reads it yet
	return e
}

func (e *env) close() {
	if e.m != nil {
		e.m.Close()
		e.store.Close()
		e.m = nil
	}
}

func (e *env) stage(t *testing.T, data []byte) *Staging {
	t.Helper()
	st, err := e.m.NewStaging("k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSyncCommitUploadsAndCaches(t *testing.T) {
	e := newEnv(t, Sync, newBucket(), "")
	data := bytes.Repeat([]byte("checkpoint"), 20000)
	j, err := e.m.Commit(context.Background(), "ckpt/a.pt", e.stage(t, data), backend.VersionAbsent, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := e.bucket.get("ckpt/a.pt"); !ok || !bytes.Equal(got, data) {
		t.Fatal("object not in the bucket after a sync commit")
	}
	if err := j.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, ok := e.uploaded.Load("ckpt/a.pt")
	if !ok {
		t.Fatal("the namespace was not told of the upload")
	}
	// The written file is now the cached copy: complete, no fetch needed.
	o, err := e.store.Acquire(cache.ObjectKey{Source: e.bucket.String(), Key: "ckpt/a.pt", Version: v.(backend.ObjectInfo).Version, Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	buf := make([]byte, len(data))
	if !o.Complete() {
		t.Fatal("uploaded file not adopted into the cache")
	}
	if _, err := o.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, data) {
		t.Fatalf("cached copy: %v", err)
	}
	if s := e.m.Summary(); s.Pending != 0 || len(s.Failed) != 0 {
		t.Fatalf("summary %+v", s)
	}
}

func TestAsyncResumesAfterRestart(t *testing.T) {
	b := newBucket()
	b.setFail(backend.ErrUnavailable)
	dir := t.TempDir()
	e := newEnv(t, Async, b, dir)
	data := []byte("survives a restart")
	if _, err := e.m.Commit(context.Background(), "k", e.stage(t, data), "", 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // let an attempt fail
	e.close()
	if _, ok := b.get("k"); ok {
		t.Fatal("object appeared while the backend failed")
	}

	b.setFail(nil)
	e2 := newEnv(t, Async, b, dir)
	if _, ok := e2.pending.Load("k"); !ok {
		t.Fatal("the namespace was not shown the journaled upload")
	}
	if err := e2.m.WaitKey(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("k"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("after restart: %q %v", got, ok)
	}
}

func TestLastCommitWins(t *testing.T) {
	b := newBucket()
	b.gate = make(chan struct{})
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	if _, err := e.m.Commit(ctx, "k", e.stage(t, []byte("first")), "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Commit(ctx, "k", e.stage(t, []byte("second")), "", 2); err != nil {
		t.Fatal(err)
	}
	close(b.gate)
	if err := e.m.WaitKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if got, _ := b.get("k"); string(got) != "second" {
		t.Fatalf("bucket has %q", got)
	}
	if ents, _ := os.ReadDir(e.store.StagingDir()); len(ents) != 0 {
		t.Fatalf("%d staging files left", len(ents))
	}
}

func TestConflictIsPermanentAndKeepsData(t *testing.T) {
	b := newBucket()
	b.objs["k"], b.vers["k"] = []byte("someone else's"), "theirs"
	var logged bytes.Buffer
	e := openEnv(t, b, b, "", func(o *Options) {
		o.Mode, o.Logger = Sync, slog.New(slog.NewTextHandler(&logged, nil))
	})
	_, err := e.m.Commit(context.Background(), "k", e.stage(t, []byte("mine")), "mybase", 1)
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("want ErrPreconditionFailed, got %v", err)
	}
	// The log says what happened and what to do, not that a retry comes
	// (it said "kept in the cache for a retry", and none came).
	for _, w := range []string{"not retried by itself", "changed in the bucket since this file was opened", "strata uploads"} {
		if !strings.Contains(logged.String(), w) {
			t.Errorf("the conflict's log line does not say %q:\n%s", w, logged.String())
		}
	}
	if got, _ := b.get("k"); string(got) != "someone else's" {
		t.Fatal("conflicting write clobbered the other writer")
	}
	s := e.m.Summary()
	if len(s.Failed) != 1 {
		t.Fatalf("summary %+v", s)
	}
	if kept, err := os.ReadFile(s.Failed[0].Staging); err != nil || string(kept) != "mine" {
		t.Fatalf("local copy not kept: %q %v", kept, err)
	}
	// Writing the file again (unconditionally) supersedes the failure.
	if _, err := e.m.Commit(context.Background(), "k", e.stage(t, []byte("mine, again")), "", 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.get("k"); string(got) != "mine, again" {
		t.Fatalf("bucket %q", got)
	}
}

func TestCancelAndRekey(t *testing.T) {
	b := newBucket()
	b.gate = make(chan struct{})
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	if _, err := e.m.Commit(ctx, "gone", e.stage(t, []byte("deleted before upload")), "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Commit(ctx, "tmp", e.stage(t, []byte("renamed")), "", 1); err != nil {
		t.Fatal(err)
	}
	b.objs["old"], b.vers["old"] = []byte("x"), "v"
	e.m.Cancel("gone")
	if r, err := e.m.Rekey("tmp", "final", "old"); !r.Moved || err != nil {
		t.Fatal("Rekey found nothing pending")
	}
	close(b.gate)
	if err := e.m.WaitKey(ctx, "final"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"gone": "", "tmp": "", "final": "renamed", "old": ""} {
		got, ok := b.get(key)
		if string(got) != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", key, got, ok, want)
		}
	}
}

// TestStagingCountsAgainstCacheSize: a write past the cache size fails
// whole, and fails its session.
func TestStagingCountsAgainstCacheSize(t *testing.T) {
	dir := t.TempDir()
	e := &env{store: openStore(t, dir, 1<<20), bucket: newBucket()}
	m, err := New(e.store, e.bucket, DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(e.close)
	st, _ := m.NewStaging("k")
	if _, err := st.WriteAt(make([]byte, 512<<10), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt(make([]byte, 1<<20), 512<<10); !errors.Is(err, cache.ErrNoSpace) {
		t.Fatalf("want ErrNoSpace, got %v", err)
	}
	if st.Size() != 512<<10 {
		t.Fatalf("size %d after a refused write", st.Size())
	}
	// The refused write fails the session (dd into a full cache disk):
	// its close cannot upload what is left.
	if !errors.Is(st.Failed(), cache.ErrNoSpace) {
		t.Fatalf("failed = %v after a refused write", st.Failed())
	}
	if _, err := m.Register("k", st, "", 0, false); !errors.Is(err, cache.ErrNoSpace) || !errors.Is(err, ErrFailedSession) {
		t.Fatalf("register of the failed session: %v", err)
	}
	st.Discard()
	if e.store.Used() != 0 {
		t.Fatalf("used %d after discard", e.store.Used())
	}
}

func TestKeepSetsAsideAndReports(t *testing.T) {
	b := newBucket()
	dir := t.TempDir()
	e := newEnv(t, Sync, b, dir)
	e.m.Keep("ckpt", e.stage(t, []byte("half a checkpoint")), errors.New("write failed"))
	s := e.m.Summary()
	if len(s.Failed) != 1 || s.Failed[0].Key != "ckpt" {
		t.Fatalf("summary %+v", s)
	}
	if kept, err := os.ReadFile(s.Failed[0].Staging); err != nil || string(kept) != "half a checkpoint" {
		t.Fatalf("kept copy: %q %v", kept, err)
	}
	if _, ok := b.get("ckpt"); ok || b.puts.Load() != 0 {
		t.Fatal("a kept write was uploaded")
	}
	if e.store.Used() != 0 {
		t.Fatalf("a kept copy still counts %d bytes", e.store.Used())
	}
	// A restart still reports it; writing the file again whole clears it.
	e.close()
	e2 := newEnv(t, Sync, b, dir)
	if s := e2.m.Summary(); len(s.Failed) != 1 || s.Failed[0].Key != "ckpt" {
		t.Fatalf("after restart: %+v", s)
	}
	path := s.Failed[0].Staging
	if _, err := e2.m.Commit(context.Background(), "ckpt", e2.stage(t, []byte("whole")), "", 2); err != nil {
		t.Fatal(err)
	}
	if s := e2.m.Summary(); len(s.Failed) != 0 {
		t.Fatalf("after a new write: %+v", s)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("kept copy left after a new write: %v", err)
	}
}

func TestHeldUploadWaitsForUnhold(t *testing.T) {
	defer func(w time.Duration) { heldReleaseWait = w }(heldReleaseWait)
	heldReleaseWait = 50 * time.Millisecond
	b := newBucket()
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	if _, err := e.m.CommitHeld(ctx, "k", e.stage(t, []byte("prefix")), "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitAll(ctx); err != nil { // held: not waited for past heldReleaseWait
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if b.puts.Load() != 0 {
		t.Fatal("a held upload started")
	}
	if _, err := e.m.CommitHeld(ctx, "k", e.stage(t, []byte("whole file")), "", 2); err != nil {
		t.Fatal(err)
	}
	e.m.Unhold("k")
	if err := e.m.WaitKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.get("k"); string(got) != "whole file" || b.puts.Load() != 1 {
		t.Fatalf("bucket %q after %d puts", got, b.puts.Load())
	}
}

// TestRetryLeavesAHeldUploadHeld: a retry (strata uploads --retry) does
// not start the upload of a file still open for writing: it would publish
// the file half written. The upload goes at the last close (Unhold), at
// once even with an upload delay: the retry expedited it.
func TestRetryLeavesAHeldUploadHeld(t *testing.T) {
	e := newDelayedEnv(t, time.Hour)
	ctx := context.Background()
	if _, err := e.m.CommitHeld(ctx, "d/open", e.stageAt(t, "d/open", []byte("half")), "", 1); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "d/open"} {
		if n, err := e.m.Retry(key); err != nil || n != 1 {
			t.Fatalf("Retry(%q): %d, %v", key, n, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if us := e.m.Uploads(); len(us) != 1 || us[0].State != StateHeld {
		t.Fatalf("after the retries: %+v, want one held upload", us)
	}
	if _, ok := e.bucket.get("d/open"); ok {
		t.Fatal("a file still open was uploaded")
	}
	e.m.Unhold("d/open")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.m.WaitKey(ctx, "d/open"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.bucket.get("d/open"); string(got) != "half" {
		t.Fatalf("the bucket holds %q", got)
	}
}

// TestContentUntilTheNamespaceHasTheUpload: a file's committed bytes stay
// readable from the manager (Content) until the namespace holds the
// uploaded version, so a reader never finds neither; then the local entry
// goes, unless the file is being written again.
func TestContentUntilTheNamespaceHasTheUpload(t *testing.T) {
	b := newBucket()
	e := newEnvHoldingUpserts(t, b)
	m := e.m
	e.local.Store("k", true) // as the filesystem shows a new file
	data := []byte("whole checkpoint")
	if _, err := m.Commit(context.Background(), "k", e.stage(t, data), "", 1); err != nil {
		t.Fatal(err)
	}
	// The upload is in the bucket; the namespace update is held.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := b.get("k"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("upload did not reach the bucket")
		}
	}
	for range 50 {
		c, ok := m.Content("k")
		if !ok {
			t.Fatal("content gone before the namespace has the upload")
		}
		buf := make([]byte, c.Size())
		if _, err := c.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, data) {
			t.Fatalf("content read %q: %v", buf, err)
		}
		c.Release()
	}
	close(e.upserted)
	if err := m.WaitKey(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Content("k"); ok {
		t.Fatal("content still held after the upload completed")
	}
	if _, ok := e.local.Load("k"); ok {
		t.Fatal("the local entry stayed after the upload")
	}
	if _, ok := e.uploaded.Load("k"); !ok {
		t.Fatal("the namespace does not have the upload")
	}

	// Being written again (a session open) when the upload completes: the
	// local entry stays.
	e.local.Store("k", true)
	again, _ := m.NewStaging("k")
	defer again.Discard()
	if _, err := m.Commit(context.Background(), "k", e.stage(t, []byte("second")), "", 2); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitKey(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.local.Load("k"); !ok {
		t.Fatal("the local entry went while the file is being written again")
	}
}

// TestRekeyWhileUploadLands renames a file whose upload has reached the
// bucket but is not yet settled. The content must end up under one name
// the caller can tell: Rekey moves it (the new name is uploaded) or
// reports it landed (the caller renames the bucket's object).
func TestRekeyWhileUploadLands(t *testing.T) {
	b := newBucket()
	e := newEnvHoldingUpserts(t, b)
	m := e.m
	ctx := context.Background()
	data := []byte("checkpoint being renamed")
	st, err := m.NewStaging("tmp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, "tmp", st, "", 1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := b.get("tmp"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("upload did not reach the bucket")
		}
	}
	moved, err := m.Rekey("tmp", "final", "")
	if err != nil {
		t.Fatal(err)
	}
	close(e.upserted)
	if err := m.WaitKey(ctx, "final"); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitKey(ctx, "tmp"); err != nil {
		t.Fatal(err)
	}
	name := "tmp" // landed: the caller copies it
	if moved.Moved {
		name = "final"
	}
	if got, ok := b.get(name); !ok || !bytes.Equal(got, data) {
		t.Fatalf("Rekey moved=%v: %q holds %q (present %v)", moved.Moved, name, got, ok)
	}
	if moved.Moved {
		return
	}
	if _, ok := m.Content("final"); ok {
		t.Fatal("content held under the new name of a landed upload")
	}
}

// TestRenameCutShortIsFinishedByTheNextMount: the Hugging Face pattern
// (files into tmp-checkpoint-1/, the directory renamed to checkpoint-1)
// killed midway through the rename: one file copied, one not, one still
// a pending upload under the old name. The next mount finishes the
// rename before uploading: the bucket ends with exactly the new names.
func TestRenameCutShortIsFinishedByTheNextMount(t *testing.T) {
	b := newBucket()
	b.gate = make(chan struct{}) // uploads wait: "c" stays pending
	dir := t.TempDir()
	e := newEnv(t, Async, b, dir)
	ctx := context.Background()
	b.objs["tmp-checkpoint-1/a"], b.vers["tmp-checkpoint-1/a"] = []byte("A"), "va"
	b.objs["tmp-checkpoint-1/b"], b.vers["tmp-checkpoint-1/b"] = []byte("B"), "vb"
	b.objs["other"], b.vers["other"] = []byte("O"), "vo"
	if _, err := e.m.Commit(ctx, "tmp-checkpoint-1/c", e.stage(t, []byte("C")), "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.BeginMove("tmp-checkpoint-1/", "checkpoint-1/", true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Copy(ctx, "tmp-checkpoint-1/a", "", "checkpoint-1/a"); err != nil {
		t.Fatal(err)
	}
	e.close() // the crash: no Rekey, no Done
	b.gate = nil

	e2 := newEnv(t, Async, b, dir)
	if _, err := e2.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"checkpoint-1/a", "checkpoint-1/b", "checkpoint-1/c", "other"}
	if got := b.keys(); !slices.Equal(got, want) {
		t.Fatalf("bucket %q, want %q", got, want)
	}
	for k, v := range map[string]string{"checkpoint-1/a": "A", "checkpoint-1/b": "B", "checkpoint-1/c": "C"} {
		if got, _ := b.get(k); string(got) != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// Finished once: a third mount has nothing left to do.
	e2.close()
	b.objs["tmp-checkpoint-1/late"] = []byte("L")
	e3 := newEnv(t, Async, b, dir)
	if _, err := e3.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.get("tmp-checkpoint-1/late"); !ok {
		t.Fatal("a finished rename was repeated by the next mount")
	}
}

// TestEarlierAttemptLandedIsNotAConflict: a create-only upload finds the
// key taken by its own earlier attempt (killed with the request in
// flight): the same bytes are the upload done, not a conflict; other
// bytes of the same size still are one.
func TestEarlierAttemptLandedIsNotAConflict(t *testing.T) {
	b := newBucket()
	b.objs["k"], b.vers["k"] = []byte("mine"), "v1"
	b.objs["j"], b.vers["j"] = []byte("them"), "v2"
	e := newEnv(t, Sync, b, "")
	ctx := context.Background()
	if _, err := e.m.Commit(ctx, "k", e.stage(t, []byte("mine")), backend.VersionAbsent, 1); err != nil {
		t.Fatalf("the bucket already holds these bytes: %v", err)
	}
	if _, err := e.m.Commit(ctx, "j", e.stage(t, []byte("mine")), backend.VersionAbsent, 1); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("other bytes of the same size: want ErrPreconditionFailed, got %v", err)
	}
	if got, _ := b.get("j"); string(got) != "them" {
		t.Fatal("a conflicting upload clobbered the other writer")
	}
	if s := e.m.Summary(); len(s.Failed) != 1 || s.Failed[0].Key != "j" {
		t.Fatalf("summary %+v", s)
	}
}

// TestCancelLeavesNothingJournaled: a file deleted while its upload runs
// must not be uploaded by the next mount should this one be killed right
// after unlink returned: Cancel takes the journal entry out at once, or
// marks it as an upload to take down, not to send (UploadOvertaken:
// TestDeleteInFlightIsJournaledUntilTakenDown).
func TestCancelLeavesNothingJournaled(t *testing.T) {
	b := newBucket()
	b.gate = make(chan struct{}) // the upload runs and waits
	e := newEnv(t, Async, b, "")
	if _, err := e.m.Commit(context.Background(), "doomed", e.stage(t, []byte("deleted while uploading")), "", 1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); b.puts.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upload did not start")
		}
	}
	e.m.Cancel("doomed")
	var left []string
	if err := e.store.Index().ScanUploads(func(_ uint64, r index.UploadRecord, err error) error {
		if r.State != index.UploadOvertaken {
			left = append(left, r.Key)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("journal after Cancel returned: %q (a kill -9 now would upload a deleted file)", left)
	}
	close(b.gate)
}

// TestWaitAllWaitsForAReleaseOnItsWay: `strata sync` right after close()
// waits for the file's upload. close() returns before the daemon sees the
// RELEASE (the kernel sends it in the background), so the file's upload
// may still be held when the sync comes: WaitAll gives a held upload up
// to heldReleaseWait for its hold to end, and waits for it if it does.
func TestWaitAllWaitsForAReleaseOnItsWay(t *testing.T) {
	b := newBucket()
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	if _, err := e.m.CommitHeld(ctx, "k", e.stage(t, []byte("closed")), "", 1); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond) // the RELEASE, late
		e.m.Unhold("k")
	}()
	if _, err := e.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("k"); !ok || string(got) != "closed" {
		t.Fatalf("WaitAll returned before the upload of a file released 200 ms after it began: bucket %q %v", got, ok)
	}
}

// TestAttemptReleasesItsStop: an upload attempt's stop (a context made
// per attempt, child of the manager's) is released when the attempt ends,
// not kept by the manager until unmount: one per upload of a long-lived
// mount.
func TestAttemptReleasesItsStop(t *testing.T) {
	b := newBucket()
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	for i := range 3 {
		if _, err := e.m.Commit(ctx, "k", e.stage(t, []byte{byte(i)}), "", int64(i)); err != nil {
			t.Fatal(err)
		}
		if err := e.m.WaitKey(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.stops) != 3 {
		t.Fatalf("%d puts, want 3", len(b.stops))
	}
	for i, stop := range b.stops {
		if !backend.Stopped(stop) {
			t.Errorf("attempt %d ended and its stop context is still live (held by the manager until unmount)", i)
		}
	}
}

// TestWaitAllFollowsAHeldUploadSuperseded: the file's last release may
// commit it anew (written after its previous close, through a mapping)
// instead of letting the held upload go: a sync that came in between
// waits for the new commit, which carries the file's bytes.
func TestWaitAllFollowsAHeldUploadSuperseded(t *testing.T) {
	b := newBucket()
	b.gate = make(chan struct{}) // the new commit's upload is slow
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	if _, err := e.m.CommitHeld(ctx, "k", e.stage(t, []byte("closed")), "", 1); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond) // the RELEASE, late, commits again
		if _, err := e.m.Commit(ctx, "k", e.stage(t, []byte("closed, then mapped")), "", 2); err != nil {
			t.Error(err)
		}
		e.m.Unhold("k")
		time.Sleep(heldReleaseWait + time.Second) // past the wait for holds
		close(b.gate)
	}()
	if _, err := e.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("k"); !ok || string(got) != "closed, then mapped" {
		t.Fatalf("WaitAll returned before the upload of the commit that superseded the held one: bucket %q %v", got, ok)
	}
}
