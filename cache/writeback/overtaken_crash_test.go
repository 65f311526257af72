package writeback

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// TestDeleteInFlightIsJournaledUntilTakenDown: a file deleted while its
// upload is in flight (the object in the bucket, the answer not back)
// must stay journaled, as an upload to take down, until the attempt has
// ended: a kill -9 in that window otherwise leaves the deleted file in
// the bucket for good, since the next mount knew nothing of it. Before,
// the delete removed the entry at once.
func TestDeleteInFlightIsJournaledUntilTakenDown(t *testing.T) {
	e, b, release := inFlight(t, "ckpt/model.bin", []byte("weights"))
	defer release()
	e.m.Cancel("ckpt/model.bin")
	recs := journalOf(t, e)
	if len(recs) != 1 || recs[0].State != index.UploadOvertaken || recs[0].Key != "ckpt/model.bin" {
		t.Fatalf("journal while the deleted file's upload is in flight: %+v; want one entry to take down", recs)
	}
	if _, err := os.Stat(filepath.Join(e.m.store.StagingDir(), recs[0].Staging)); err != nil {
		t.Fatalf("its staged bytes (to recognise what landed): %v", err)
	}
	release()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		_, inBucket := b.get("ckpt/model.bin")
		if !inBucket && len(journalOf(t, e)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the attempt: in the bucket %v, journal %+v", inBucket, journalOf(t, e))
		}
	}
}

// TestNextMountTakesDownWhatADeletedUploadLanded: the next mount after
// a kill -9 in that window finds the entry: the object of the deleted
// file (the staged bytes exactly) is taken down, hidden meanwhile, and
// the entry and its staged file go. An object of the name holding other
// bytes (another writer's, since) stays, and is shown.
func TestNextMountTakesDownWhatADeletedUploadLanded(t *testing.T) {
	b := newBucket()
	staged := map[string]string{}
	var recs []index.UploadRecord
	for _, key := range []string{"mine.bin", "theirs.bin"} {
		staged["overtaken-"+key] = "deleted weights"
		recs = append(recs, index.UploadRecord{Key: key, Staging: "overtaken-" + key, Size: int64(len("deleted weights")),
			BaseVersion: backend.VersionAbsent, State: index.UploadOvertaken})
	}
	dir := leftByAKill(t, b, staged, recs...)
	b.objs["mine.bin"], b.vers["mine.bin"] = []byte("deleted weights"), "v1"
	b.objs["theirs.bin"], b.vers["theirs.bin"] = []byte("another writer's"), "v2"

	e := openEnv(t, b, b, dir, func(o *Options) { o.Mode = Async })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		_, mine := b.get("mine.bin")
		_, hid1 := e.hidden.Load("mine.bin")
		_, hid2 := e.hidden.Load("theirs.bin")
		if !mine && len(journalOf(t, e)) == 0 && !hid1 && !hid2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next mount: mine.bin in the bucket %v, journal %+v, hidden %v %v", mine, journalOf(t, e), hid1, hid2)
		}
	}
	if got, ok := b.get("theirs.bin"); !ok || string(got) != "another writer's" {
		t.Errorf("another writer's object of the name: %q, %v; want it kept", got, ok)
	}
	// And shown at once: ending the hiding records the name as gone,
	// which before hid that object until the metadata TTL.
	if got, ok := e.uploaded.Load("theirs.bin"); !ok || got.(backend.ObjectInfo).Version != "v2" {
		t.Errorf("another writer's object in the namespace: %+v, %v; want version v2", got, ok)
	}
	if ents, _ := os.ReadDir(e.m.store.StagingDir()); len(ents) != 0 {
		t.Errorf("staged files left: %v", ents)
	}
	for _, key := range []string{"mine.bin", "theirs.bin"} {
		if _, local := e.local.Load(key); local {
			t.Errorf("%s shown as a local file", key)
		}
	}
}

// inFlight commits key (async, a new file) to a bucket whose first Put
// stores the object and then holds its answer until release is called
// (deferred by the caller: the manager's close waits for the attempt),
// and returns once the object is in the bucket.
func inFlight(t *testing.T, key string, data []byte) (*env, *fakeBucket, func()) {
	t.Helper()
	return inFlightWith(t, key, data, nil)
}

// inFlightWith is inFlight with set's changes to the options.
func inFlightWith(t *testing.T, key string, data []byte, set func(*Options)) (*env, *fakeBucket, func()) {
	t.Helper()
	b := newBucket()
	b.landed = make(chan struct{})
	release := sync.OnceFunc(func() { close(b.landed) })
	e := openEnv(t, b, b, "", func(o *Options) {
		o.Mode = Async
		if set != nil {
			set(o)
		}
	})
	if _, err := e.m.Commit(context.Background(), key, e.stageAt(t, key, data), backend.VersionAbsent, 1); err != nil {
		release()
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := b.get(key); ok {
			return e, b, release
		}
		if time.Now().After(deadline) {
			release()
			t.Fatalf("%s never reached the bucket", key)
		}
	}
}

// journalOf returns e's journal entries of its source.
func journalOf(t *testing.T, e *env) []index.UploadRecord {
	t.Helper()
	var recs []index.UploadRecord
	if err := e.m.ix.ScanUploads(func(_ uint64, r index.UploadRecord, err error) error {
		if err == nil && r.Source == e.m.source {
			recs = append(recs, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestRenameInFlightIsJournaledUntilTakenDown: a file renamed while its
// upload is in flight goes up again under the new name, and what the
// attempt lands under the old name is taken down. Until that attempt has
// ended, the journal must say both: a kill -9 in between otherwise left
// the old name in the bucket for good, beside the new one.
func TestRenameInFlightIsJournaledUntilTakenDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, b, release := inFlight(t, "tmp/model.bin", []byte("weights"))
	defer release()
	if _, err := e.m.Rekey("tmp/model.bin", "model.bin", ""); err != nil {
		t.Fatal(err)
	}
	states := map[string]index.UploadState{}
	staged := map[string]bool{}
	for _, r := range journalOf(t, e) {
		states[r.Key] = r.State
		staged[r.Staging] = true
	}
	if len(states) != 2 || states["tmp/model.bin"] != index.UploadOvertaken || states["model.bin"] != index.UploadPending || len(staged) != 1 {
		t.Fatalf("journal while the renamed file's upload is in flight: %+v; want the new name to upload and the old one to take down, of one staged file", journalOf(t, e))
	}
	release()
	if err := e.m.WaitKey(ctx, "model.bin"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		_, old := b.get("tmp/model.bin")
		if !old && len(journalOf(t, e)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the attempt: the old name in the bucket %v, journal %+v", old, journalOf(t, e))
		}
	}
	if got, ok := b.get("model.bin"); !ok || string(got) != "weights" {
		t.Fatalf("the new name in the bucket: %q, %v", got, ok)
	}
}

// TestNextMountFinishesARenameInFlight: the journal a kill -9 left in
// that window (the new name's upload and the old name's take-down, of one
// staged file): the next mount takes the old name's object down and
// uploads the new name from the same staged file, which then goes.
func TestNextMountFinishesARenameInFlight(t *testing.T) {
	b := newBucket()
	dir := leftByAKill(t, b, map[string]string{"s1": "weights"},
		index.UploadRecord{Key: "model.bin", Staging: "s1", Size: 7},
		index.UploadRecord{Key: "tmp/model.bin", Staging: "s1", Size: 7, BaseVersion: backend.VersionAbsent, State: index.UploadOvertaken})
	b.objs["tmp/model.bin"], b.vers["tmp/model.bin"] = []byte("weights"), "v1"

	e := openEnv(t, b, b, dir, func(o *Options) { o.Mode = Async })
	waitUploaded(t, e, b, "model.bin", "weights")
	// The old name's take-down runs beside the new name's upload (a
	// rename's order: the new name up, the old one down).
	waitJournal(t, e, "the new name's upload", func(recs []index.UploadRecord) bool {
		_, old := b.get("tmp/model.bin")
		return !old && len(recs) == 0
	})
	if ents, _ := os.ReadDir(e.m.store.StagingDir()); len(ents) != 0 {
		t.Errorf("staged files left: %v", ents)
	}
}

// TestAnAttemptCutByTheMountsEndLeavesItsTakeDown: the mount stops while
// a deleted file's upload is in flight; its last request may land after
// the daemon has gone (here: it lands again once the daemon is down), so
// the entry to take it down stays for the next mount, which does.
func TestAnAttemptCutByTheMountsEndLeavesItsTakeDown(t *testing.T) {
	e, b, release := inFlight(t, "ckpt/model.bin", []byte("weights"))
	defer release()
	e.m.Cancel("ckpt/model.bin")
	closed := make(chan struct{})
	go func() { e.close(); close(closed) }()
	for deadline := time.Now().Add(5 * time.Second); e.m.ctx.Err() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the manager never began to close")
		}
	}
	release() // answered after the mount's end began
	<-closed
	b.mu.Lock()
	b.objs["ckpt/model.bin"], b.vers["ckpt/model.bin"] = []byte("weights"), "late" // the request lands now
	b.mu.Unlock()

	next := openEnv(t, b, b, e.dir, func(o *Options) { o.Mode = Async })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		_, inBucket := b.get("ckpt/model.bin")
		if !inBucket && len(journalOf(t, next)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next mount: the deleted file in the bucket %v, journal %+v", inBucket, journalOf(t, next))
		}
	}
}
