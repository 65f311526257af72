package writeback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// TestSyncWaitsForATakeDown: `strata sync` (WaitAll) after a file deleted
// while its upload was in flight, whose object landed and whose take-down
// the bucket refuses for a moment. Sync must not report the bucket in
// step while the deleted file is still in it: it waits for the take-down,
// which `strata uploads` lists with its error meanwhile. Before, WaitAll
// waited for uploads only, and returned with the object still there.
func TestSyncWaitsForATakeDown(t *testing.T) {
	const key = "tmp/model.bin"
	e, b := failedTakeDown(t, key)
	u, ok := uploadOf(e.m.Uploads(), key)
	if !ok || u.State != StateTakingDown || !strings.Contains(u.Error, errUnreachable.Error()) {
		t.Errorf("strata uploads lists %+v (listed: %v), want state %q with the delete's error", u, ok, StateTakingDown)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	synced := make(chan error, 1)
	go func() {
		_, err := e.m.WaitAll(ctx)
		synced <- err
	}()
	select {
	case err := <-synced:
		_, inBucket := b.get(key)
		t.Fatalf("sync returned (err %v) while the take-down was still refused; the deleted file in the bucket: %v", err, inBucket)
	case <-time.After(300 * time.Millisecond):
	}
	b.setDeleteFail(nil)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if _, inBucket := b.get(key); inBucket {
		t.Error("sync returned with the deleted file still in the bucket")
	}
	if _, ok := uploadOf(e.m.Uploads(), key); ok {
		t.Error("the take-down is still listed once done")
	}
}

// TestATakeDownRefusedForGoodFailsAndCanBeRetried: a take-down the bucket
// refuses as no retry can fix (credentials without delete rights) is not
// retried for ever, holding the name and keeping sync waiting: it fails,
// sync reports it (non-zero exit), the object shows under its name as the
// bucket holds it, and the journal keeps the entry for the next mount.
// `strata uploads --retry` tries it again.
func TestATakeDownRefusedForGoodFailsAndCanBeRetried(t *testing.T) {
	const key = "tmp/model.bin"
	e, b, release := inFlight(t, key, []byte("weights"))
	t.Cleanup(release)
	e.m.Cancel(key)
	b.setDeleteFail(fmt.Errorf("delete: %w", backend.ErrAccessDenied))
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sum, err := e.m.WaitAll(ctx)
	if err != nil {
		t.Fatalf("sync: %v (a take-down refused for good kept it waiting)", err)
	}
	if len(sum.Failed) != 1 || sum.Failed[0].Key != key || !strings.Contains(sum.Failed[0].Error, "access denied") {
		t.Fatalf("sync reports %+v, want the take-down of %s failed", sum.Failed, key)
	}
	if _, inBucket := b.get(key); !inBucket {
		t.Fatal("the object is gone, yet every delete was refused")
	}
	if u, ok := uploadOf(e.m.Uploads(), key); !ok || u.State != StateFailed {
		t.Errorf("strata uploads lists %+v (listed: %v), want it failed", u, ok)
	}
	if _, hidden := e.hidden.Load(key); hidden {
		t.Error("the name stays hidden though its object is there for good")
	}
	held, cancelHeld := context.WithTimeout(context.Background(), time.Second)
	defer cancelHeld()
	if err := e.m.WaitInFlight(held, key); err != nil {
		t.Error("the failed take-down still holds its name: uploads of it would wait until the mount ends")
	}
	if _, ok := takeDownOf(journalOf(t, e), key); !ok {
		t.Error("the journal dropped the take-down: the next mount would leave the object")
	}
	b.setDeleteFail(nil)
	if n, err := e.m.Retry(key); err != nil || n != 1 {
		t.Fatalf("retry: %d, %v", n, err)
	}
	waitJournal(t, e, "the retry", func(recs []index.UploadRecord) bool {
		_, ok := takeDownOf(recs, key)
		_, inBucket := b.get(key)
		return !ok && !inBucket
	})
	if len(e.m.Summary().Failed) != 0 {
		t.Errorf("still reported failed: %+v", e.m.Summary().Failed)
	}
}

// TestATakeDownRetriesSoonAfterTheBucketAnswers: a take-down whose
// delete failed does not wait out the uploads' long backoff (here a
// minute): each try is one Stat and one DELETE, as cheap as the probe
// the uploads use, so it is tried at least every probeEvery (5 s at
// most), and at once when the backend is seen answering again (another
// upload completing). Before, it waited the minute.
func TestATakeDownRetriesSoonAfterTheBucketAnswers(t *testing.T) {
	for _, another := range []bool{true, false} {
		name := map[bool]string{true: "another upload lands", false: "nothing else"}[another]
		t.Run(name, func(t *testing.T) {
			const key = "tmp/model.bin"
			e, b := failedTakeDownWith(t, key, func(o *Options) { o.RetryMin, o.RetryMax = time.Minute, time.Minute })
			b.setDeleteFail(nil)
			bound := e.m.probeEvery() + 5*time.Second
			if another {
				if _, err := e.m.Commit(context.Background(), "other.bin", e.stageAt(t, "other.bin", []byte("other")), backend.VersionAbsent, 1); err != nil {
					t.Fatal(err)
				}
				if err := e.m.WaitKey(context.Background(), "other.bin"); err != nil {
					t.Fatal(err)
				}
				bound = 5 * time.Second
			}
			for deadline := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
				_, journaled := takeDownOf(journalOf(t, e), key)
				if _, inBucket := b.get(key); !inBucket && !journaled {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the deleted file is still in the bucket %v after deletes work again", bound)
				}
			}
		})
	}
}

// uploadOf returns the entry of key in a listing.
func uploadOf(us []Upload, key string) (Upload, bool) {
	for _, u := range us {
		if u.Key == key {
			return u, true
		}
	}
	return Upload{}, false
}

// TestAFailedTakeDownCanBeDiscarded: a take-down refused for good could
// be retried but not given up: `strata uploads --discard` answered "no
// such upload" for the row the listing showed failed, sync went on
// reporting it, and every later mount tried it again. Discarded, it ends:
// the object stays in the bucket (the name shows it), the journal drops
// the entry, the listing and sync no longer show it. One still being
// retried is not given up (it may yet succeed): the answer says so.
func TestAFailedTakeDownCanBeDiscarded(t *testing.T) {
	const key = "tmp/model.bin"
	e, b := failedTakeDownWith(t, key, nil) // failed once, retried
	if _, err := e.m.Discard(context.Background(), key); !errors.Is(err, ErrStillTakingDown) {
		t.Errorf("discard of a take-down being retried: %v, want ErrStillTakingDown", err)
	}
	if sum := e.m.Summary(); sum.TakingDown != 1 || len(sum.Failed) != 0 {
		t.Errorf("summary while the take-down is retried: %+v; want it under way (unmount waits for it)", sum)
	}
	b.setDeleteFail(fmt.Errorf("delete: %w", backend.ErrAccessDenied))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sum, err := e.m.WaitAll(ctx); err != nil || len(sum.Failed) != 1 || sum.TakingDown != 0 {
		t.Fatalf("sync: %+v, %v; want the take-down failed, no longer under way", sum, err)
	}
	copies, err := e.m.Discard(context.Background(), key)
	if err != nil || len(copies) != 0 {
		t.Fatalf("discard of the failed take-down: %q, %v", copies, err)
	}
	if u, ok := uploadOf(e.m.Uploads(), key); ok {
		t.Errorf("strata uploads still lists %+v", u)
	}
	if sum, err := e.m.WaitAll(ctx); err != nil || len(sum.Failed) != 0 {
		t.Errorf("sync after the discard: %+v, %v", sum.Failed, err)
	}
	if _, ok := takeDownOf(journalOf(t, e), key); ok {
		t.Error("the journal keeps the discarded take-down: the next mount would try it again")
	}
	if n, err := e.m.Retry(key); n != 0 || !errors.Is(err, ErrNoUpload) {
		t.Errorf("retry after the discard: %d, %v", n, err)
	}
	b.setDeleteFail(nil)
	time.Sleep(100 * time.Millisecond)
	if _, inBucket := b.get(key); !inBucket {
		t.Error("the object was taken down after all")
	}
}
