package writeback

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

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
			landed := b.vers["tmp/model.bin"]
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
			b.setDeleteFail(nil)
			waitJournal(t, e, "the bucket answering again", func(recs []index.UploadRecord) bool {
				_, ok := takeDownOf(recs, "tmp/model.bin")
				_, inBucket := b.get("tmp/model.bin")
				return !ok && !inBucket
			})
			if tc.name == "renamed" {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := e.m.WaitKey(ctx, "model.bin"); err != nil {
					t.Fatal(err)
				}
				if got, ok := b.get("model.bin"); !ok || string(got) != "weights" {
					t.Fatalf("the new name in the bucket: %q, %v", got, ok)
				}
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
			e, b, release := inFlight(t, "tmp/model.bin", []byte("weights"))
			defer release()
			e.m.Cancel("tmp/model.bin")
			b.setDeleteFail(errUnreachable)
			release()
			waitJournal(t, e, "the take-down failed", func(recs []index.UploadRecord) bool {
				r, ok := takeDownOf(recs, "tmp/model.bin")
				return ok && r.ThenDeleteVersion != ""
			})
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
