package writeback

import (
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/cache/index"
)

// TestARenameInFlightJournalsWithoutTheLock: a file renamed while its
// upload's last request is on its way gets a synced journal entry to
// take down what the attempt may still land under the old name. That
// append is disk I/O: the manager's lock must not be held across it
// (every close, rename and `strata uploads` waits on that lock). Before,
// Rekey appended under it.
func TestARenameInFlightJournalsWithoutTheLock(t *testing.T) {
	e, _, release := inFlight(t, "tmp/model.bin", []byte("weights"))
	t.Cleanup(release)
	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	appendTestHook = func(r index.UploadRecord) {
		if r.State == index.UploadOvertaken && r.Key == "tmp/model.bin" {
			once.Do(func() { close(entered) })
			<-proceed
		}
	}
	t.Cleanup(func() { appendTestHook = nil })
	renamed := make(chan error, 1)
	go func() {
		_, err := e.m.Rekey("tmp/model.bin", "model.bin", "")
		renamed <- err
	}()
	select {
	case <-entered:
	case err := <-renamed:
		t.Fatalf("the rename returned (%v) without journaling the old name's take-down", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the rename never journaled the old name's take-down")
	}
	listed := make(chan struct{})
	go func() { e.m.Uploads(); close(listed) }()
	select {
	case <-listed:
	case <-time.After(5 * time.Second):
		t.Error("the manager's lock is held across the journal append: strata uploads waited for it")
	}
	select {
	case err := <-renamed:
		t.Errorf("the rename returned (%v) before its take-down entry was journaled", err)
	default:
	}
	close(proceed)
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	<-listed
	release()
	waitJournal(t, e, "the attempt's end", func(recs []index.UploadRecord) bool {
		_, ok := takeDownOf(recs, "tmp/model.bin")
		return !ok
	})
	waitUploaded(t, e, e.bucket, "model.bin", "weights")
}
