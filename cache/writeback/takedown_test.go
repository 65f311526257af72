package writeback

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

var errUnreachable = errors.New("bucket unreachable")

// TestAFailedTakeDownIsRetried: a file deleted, or renamed, while its
// upload was in flight, whose object landed all the same, and whose
// take-down then failed (the bucket out of reach for a moment). The
// take-down must stay journaled, with the version that landed, and be
// retried until the object is down; before, the failure was logged and
// the entry dropped, and the deleted file stayed in the bucket for good.
func TestAFailedTakeDownIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*env) error
	}{
		{"deleted", func(e *env) error { e.m.Cancel("tmp/model.bin"); return nil }},
		{"renamed", func(e *env) error { _, err := e.m.Rekey("tmp/model.bin", "model.bin", ""); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, b, release := inFlight(t, "tmp/model.bin", []byte("weights"))
			defer release()
			b.mu.Lock()
			landed := b.vers["tmp/model.bin"]
			b.mu.Unlock()
			if err := tc.change(e); err != nil {
				t.Fatal(err)
			}
			b.setDeleteFail(errUnreachable)
			release()
			waitJournal(t, e, "the take-down failed", func(recs []index.UploadRecord) bool {
				r, ok := takeDownOf(recs, "tmp/model.bin")
				return ok && r.ThenDeleteVersion == landed
			})
			if _, ok := b.get("tmp/model.bin"); !ok {
				t.Fatal("the object is gone, yet every delete failed")
			}
			time.Sleep(50 * time.Millisecond) // the attempt's end, which hid the name until then
			if _, hidden := e.hidden.Load("tmp/model.bin"); !hidden {
				t.Error("the name shows while its take-down is retried")
			}
			b.setDeleteFail(nil)
			waitJournal(t, e, "the bucket answering again", func(recs []index.UploadRecord) bool {
				_, ok := takeDownOf(recs, "tmp/model.bin")
				_, inBucket := b.get("tmp/model.bin")
				_, hidden := e.hidden.Load("tmp/model.bin")
				return !ok && !inBucket && !hidden
			})
			if tc.name == "renamed" {
				waitUploaded(t, e, b, "model.bin", "weights")
			}
		})
	}
}

// TestAFailedTakeDownIsLeftToTheNextMount: the take-down still failing
// when the mount ends, the next mount takes the object down, knowing its
// version (the staged file is gone with the deleted file's job), but
// leaves an object another writer put under the name since.
func TestAFailedTakeDownIsLeftToTheNextMount(t *testing.T) {
	for _, another := range []bool{false, true} {
		name := map[bool]string{false: "its object", true: "another writer's object"}[another]
		t.Run(name, func(t *testing.T) {
			e, b := failedTakeDown(t, "tmp/model.bin")
			e.close()
			if another {
				b.objs["tmp/model.bin"], b.vers["tmp/model.bin"] = []byte("theirs"), "v-theirs"
			}
			b.setDeleteFail(nil)
			next := openEnv(t, b, b, e.dir, func(o *Options) { o.Mode = Async })
			waitJournal(t, next, "the next mount", func(recs []index.UploadRecord) bool {
				_, inBucket := b.get("tmp/model.bin")
				return len(recs) == 0 && inBucket == another
			})
		})
	}
}

// takeDownOf returns the journal's UploadOvertaken entry of key.
func takeDownOf(recs []index.UploadRecord, key string) (index.UploadRecord, bool) {
	for _, r := range recs {
		if r.Key == key && r.State == index.UploadOvertaken {
			return r, true
		}
	}
	return index.UploadRecord{}, false
}

// waitJournal waits up to 5 s for e's journal to satisfy ok.
func waitJournal(t *testing.T, e *env, after string, ok func([]index.UploadRecord) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if recs := journalOf(t, e); ok(recs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: journal %+v", after, journalOf(t, e))
		}
	}
}

// TestADiscardInFlightCutByTheMountsEndLeavesItsTakeDown: `strata uploads
// --discard` of a new file whose upload is in flight, and the mount's end
// before its answer (a kill -9 does the same). What lands is a discarded
// file's: the next mount must take it down, recognising it by the copy
// kept in failed-writes, which stays. Before, the next mount found the
// entry's staged file set aside and dropped the entry: the object stayed.
func TestADiscardInFlightCutByTheMountsEndLeavesItsTakeDown(t *testing.T) {
	e, b, release := inFlight(t, "ckpt/model.bin", []byte("weights"))
	defer release()
	discarded := make(chan []string, 1)
	go func() {
		copies, _ := e.m.Discard(context.Background(), "ckpt/model.bin")
		discarded <- copies
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if ents, _ := os.ReadDir(e.m.keptDir()); len(ents) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the discard never set the staged file aside")
		}
	}
	closed := make(chan struct{})
	go func() { e.close(); close(closed) }()
	for deadline := time.Now().Add(5 * time.Second); e.m.ctx.Err() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the manager never began to close")
		}
	}
	release()
	<-closed
	b.mu.Lock()
	b.objs["ckpt/model.bin"], b.vers["ckpt/model.bin"] = []byte("weights"), "late" // the request lands now
	b.mu.Unlock()
	copies := <-discarded
	if len(copies) != 1 {
		t.Fatalf("kept copies: %v", copies)
	}

	next := openEnv(t, b, b, e.dir, func(o *Options) { o.Mode = Async })
	waitJournal(t, next, "the next mount", func(recs []index.UploadRecord) bool {
		_, inBucket := b.get("ckpt/model.bin")
		return len(recs) == 0 && !inBucket
	})
	if got, err := os.ReadFile(copies[0]); err != nil || string(got) != "weights" {
		t.Fatalf("the kept copy: %q, %v", got, err)
	}
}

// TestATakeDownHoldsTheNameUntilDone: while a failed take-down waits for
// its retry, a new file written under the name with the same bytes (a
// checkpoint saved again) must not upload: its create-only put would
// meet the old object, take it for an earlier attempt of its own (same
// bytes, same ETag), and the take-down would then remove it. It waits
// until the take-down is done, then goes up.
func TestATakeDownHoldsTheNameUntilDone(t *testing.T) {
	e, b := failedTakeDown(t, "ckpt/model.bin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := e.m.Commit(ctx, "ckpt/model.bin", e.stageAt(t, "ckpt/model.bin", []byte("weights")), backend.VersionAbsent, 2)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // time for the new upload to go, if it may, and for retries
	b.setDeleteFail(nil)
	if err := j.Wait(ctx); err != nil {
		t.Fatalf("the new file's upload: %v", err)
	}
	waitJournal(t, e, "the take-down and the new upload", func(recs []index.UploadRecord) bool { return len(recs) == 0 })
	time.Sleep(100 * time.Millisecond) // a retry still running would remove it now
	if got, ok := b.get("ckpt/model.bin"); !ok || string(got) != "weights" {
		t.Fatalf("the new file in the bucket: %q, %v", got, ok)
	}
}

// TestNextMountUploadsWhileATakeDownWaits: the next mount's take-down of
// a deleted file's upload waits for a bucket that does not answer about
// that name; the uploads of other files must not wait for it. Before,
// every upload of the mount waited up to a minute per such entry.
func TestNextMountUploadsWhileATakeDownWaits(t *testing.T) {
	b := newBucket()
	dir := leftByAKill(t, b, map[string]string{"s1": "weights", "s2": "weights"},
		index.UploadRecord{Key: "gone.bin", Staging: "s1", Size: 7, BaseVersion: backend.VersionAbsent, State: index.UploadOvertaken},
		index.UploadRecord{Key: "other.bin", Staging: "s2", Size: 7, BaseVersion: backend.VersionAbsent})
	b.objs["gone.bin"], b.vers["gone.bin"] = []byte("weights"), "v1"
	hold := make(chan struct{})
	b.statHold = map[string]chan struct{}{"gone.bin": hold}
	defer close(hold)

	e := openEnv(t, b, b, dir, func(o *Options) { o.Mode = Async })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.m.WaitKey(ctx, "other.bin"); err != nil {
		t.Fatalf("other.bin's upload while gone.bin's take-down waits: %v", err)
	}
	if _, ok := b.get("other.bin"); !ok {
		t.Fatal("other.bin is not in the bucket")
	}
}

// TestNextMountTakesDownTwoNamesOfOneStagedFile: a file renamed while
// its upload was in flight, then deleted while the upload to the new
// name was in flight, then a kill -9: two entries to take down, of one
// staged file. Each take-down must still have the bytes to compare when
// it runs, whichever ends first.
func TestNextMountTakesDownTwoNamesOfOneStagedFile(t *testing.T) {
	b := newBucket()
	var recs []index.UploadRecord
	for _, key := range []string{"tmp/model.bin", "model.bin"} {
		recs = append(recs, index.UploadRecord{Key: key, Staging: "s1", Size: 7, BaseVersion: backend.VersionAbsent, State: index.UploadOvertaken})
		b.objs[key], b.vers[key] = []byte("weights"), "v-"+key
	}
	dir := leftByAKill(t, b, map[string]string{"s1": "weights"}, recs...)
	hold := make(chan struct{})
	b.statHold = map[string]chan struct{}{"model.bin": hold}

	e := openEnv(t, b, b, dir, func(o *Options) { o.Mode = Async })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := b.get("tmp/model.bin"); !ok {
			break
		}
		if time.Now().After(deadline) {
			close(hold)
			t.Fatal("tmp/model.bin never taken down")
		}
	}
	time.Sleep(50 * time.Millisecond) // its take-down's end
	close(hold)
	waitJournal(t, e, "both take-downs", func(recs []index.UploadRecord) bool {
		_, inBucket := b.get("model.bin")
		return len(recs) == 0 && !inBucket
	})
	if ents, _ := os.ReadDir(e.m.store.StagingDir()); len(ents) != 0 {
		t.Errorf("staged files left: %v", ents)
	}
}

// TestATakeDownOfAKnownVersionLeavesNoStagedFile: a kill -9 right after
// a failed take-down was journaled with its version, before the deleted
// file's staged bytes were removed: the next mount takes the object down
// and the staged file goes too (the take-down no longer needs it).
func TestATakeDownOfAKnownVersionLeavesNoStagedFile(t *testing.T) {
	b := newBucket()
	dir := leftByAKill(t, b, map[string]string{"s1": "weights"}, index.UploadRecord{Key: "model.bin", Staging: "s1", Size: 7,
		BaseVersion: backend.VersionAbsent, State: index.UploadOvertaken, ThenDelete: "model.bin", ThenDeleteVersion: "v1"})
	b.objs["model.bin"], b.vers["model.bin"] = []byte("weights"), "v1"

	e := openEnv(t, b, b, dir, func(o *Options) { o.Mode = Async })
	waitJournal(t, e, "the next mount", func(recs []index.UploadRecord) bool {
		_, inBucket := b.get("model.bin")
		return len(recs) == 0 && !inBucket
	})
	if ents, _ := os.ReadDir(e.m.store.StagingDir()); len(ents) != 0 {
		t.Errorf("staged files left: %v", ents)
	}
}

// waitUploaded waits for key's upload in e, and for the bucket to hold
// want under key.
func waitUploaded(t *testing.T, e *env, b *fakeBucket, key, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.m.WaitKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get(key); !ok || string(got) != want {
		t.Fatalf("%s in the bucket: %q, %v; want %q", key, got, ok, want)
	}
}

// failedTakeDown deletes key, a new file, while its upload is in flight,
// the bucket refusing deletes, and returns once the attempt has landed
// and its failed take-down is journaled with the version.
func failedTakeDown(t *testing.T, key string) (*env, *fakeBucket) {
	t.Helper()
	return failedTakeDownWith(t, key, nil)
}

// failedTakeDownWith is failedTakeDown with set's changes to the options.
func failedTakeDownWith(t *testing.T, key string, set func(*Options)) (*env, *fakeBucket) {
	t.Helper()
	e, b, release := inFlightWith(t, key, []byte("weights"), set)
	t.Cleanup(release) // before the manager's close, which waits for the attempt
	e.m.Cancel(key)
	b.setDeleteFail(errUnreachable)
	release()
	waitJournal(t, e, "the take-down failed", func(recs []index.UploadRecord) bool {
		r, ok := takeDownOf(recs, key)
		return ok && r.ThenDeleteVersion != ""
	})
	return e, b
}

// leftByAKill returns a cache dir holding what a daemon of b killed
// mid-way leaves: the staged files (name: bytes) and the journal entries
// recs (their Source set to b's).
func leftByAKill(t *testing.T, b *fakeBucket, staged map[string]string, recs ...index.UploadRecord) string {
	t.Helper()
	dir := t.TempDir()
	first := openEnv(t, b, b, dir, func(o *Options) { o.Mode = Async })
	defer first.close()
	for name, data := range staged {
		if err := os.WriteFile(filepath.Join(first.m.store.StagingDir(), name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		r.Source = first.m.source
		if _, err := first.m.ix.AppendUpload(r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
