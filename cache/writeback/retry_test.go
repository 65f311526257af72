package writeback

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestBackoffEndsWhenTheBackendAnswers: an upload that failed while the
// backend was down waits out a 10-minute backoff no more once the backend
// answers again: it completes within the test's minute.
func TestBackoffEndsWhenTheBackendAnswers(t *testing.T) {
	b := newBucket()
	b.setFail(backend.ErrUnavailable)
	dir := t.TempDir()
	e := &env{store: openStore(t, dir, 1<<30), bucket: b, dir: dir}
	o := DefaultOptions()
	o.Mode, o.RetryMin, o.RetryMax, o.Delay = Async, 10*time.Minute, 10*time.Minute, 0
	m, err := New(e.store, b, o, &fakeNames{e: e})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(e.close)
	data := []byte("written while the backend was down")
	j, err := m.Commit(context.Background(), "k", e.stage(t, data), "", 1)
	if err != nil {
		t.Fatal(err)
	}
	<-j.attempted // failed: the next attempt is 10 minutes away
	if j.firstErr == nil {
		t.Fatal("the first attempt succeeded against a backend that is down")
	}
	time.Sleep(50 * time.Millisecond) // probes that find it still down change nothing
	b.setFail(nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.WaitKey(ctx, "k"); err != nil {
		t.Fatalf("the upload still waits for its backoff after the backend came back: %v", err)
	}
	if got, ok := b.get("k"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("bucket holds %q %v", got, ok)
	}
}
