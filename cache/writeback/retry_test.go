package writeback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
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

// TestInvalidRequestFailsForGood: an upload the backend refuses as
// invalid (MinIO's 400 XMinioInvalidObjectName, S3's KeyTooLongError) is
// not retried: it fails for good after one attempt, keeps its staged
// copy, is listed as failed, and sync (WaitAll) ends and reports it
// instead of waiting for ever.
func TestInvalidRequestFailsForGood(t *testing.T) {
	b := newBucket()
	refused := fmt.Errorf("s3: put k: %w: %w", backend.ErrInvalidRequest, errors.New("api error XMinioInvalidObjectName"))
	b.setFail(refused)
	e := newEnv(t, Async, b, "")
	data := []byte("a key the bucket refuses")
	j, err := e.m.Commit(context.Background(), "k", e.stage(t, data), backend.VersionAbsent, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j.Wait(ctx); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Fatalf("the upload ended with %v; want it failed for good with ErrInvalidRequest", err)
	}
	s, err := e.m.WaitAll(ctx)
	if err != nil || len(s.Failed) != 1 || s.Failed[0].Key != "k" || s.Pending != 0 {
		t.Fatalf("sync: %+v, %v; want k reported failed, nothing pending", s, err)
	}
	if kept, err := os.ReadFile(s.Failed[0].Staging); err != nil || !bytes.Equal(kept, data) {
		t.Fatalf("the staged copy is not kept: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // retries are 10-50 ms apart here
	if n := b.puts.Load(); n != 1 {
		t.Fatalf("%d attempts; a refused request must not be sent again", n)
	}
	if us := e.m.Uploads(); len(us) != 1 || us[0].State != StateFailed {
		t.Fatalf("uploads: %+v; want k failed", us)
	}
}
