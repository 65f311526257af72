package writeback

import (
	"context"
	"testing"
	"time"
)

// newDelayedEnv is an async env whose uploads wait for delay.
func newDelayedEnv(t *testing.T, delay time.Duration) *env {
	t.Helper()
	b := newBucket()
	return openEnv(t, b, b, "", func(o *Options) { o.Mode, o.Delay = Async, delay })
}

// stageAt stages data as a write session of key.
func (e *env) stageAt(t *testing.T, key string, data []byte) *Staging {
	t.Helper()
	st, err := e.m.NewStaging(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitObject waits up to limit for key to hold data in the bucket.
func waitObject(t *testing.T, b *fakeBucket, key, data string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		if got, ok := b.get(key); ok && string(got) == data {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not uploaded within %v (bucket: %q)", key, limit, b.keys())
		}
	}
}

// TestUploadDelayWaitsForAQuietDirectory: a committed file is not
// uploaded while another file of its directory is being written, nor
// before its directory has been quiet for the delay; a rename meanwhile
// moves the upload, so the old name never reaches the bucket.
func TestUploadDelayWaitsForAQuietDirectory(t *testing.T) {
	const delay = 300 * time.Millisecond
	e := newDelayedEnv(t, delay)
	ctx := context.Background()
	if _, err := e.m.Commit(ctx, "tmp/a", e.stageAt(t, "tmp/a", []byte("model")), "", 1); err != nil {
		t.Fatal(err)
	}
	b := e.stageAt(t, "tmp/b", []byte("optim")) // written for longer than the delay
	time.Sleep(3 * delay)
	if keys := e.bucket.keys(); len(keys) > 0 {
		t.Fatalf("uploaded while a file of the directory is written: %q", keys)
	}
	if _, err := e.m.Commit(ctx, "tmp/b", b, "", 2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := e.m.Rekey("tmp/"+name, "final/"+name, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitObject(t, e.bucket, "final/a", "model", 10*time.Second)
	waitObject(t, e.bucket, "final/b", "optim", 10*time.Second)
	if keys := e.bucket.keys(); len(keys) != 2 {
		t.Fatalf("bucket holds %q, want final/a and final/b only", keys)
	}
	if n := e.bucket.puts.Load(); n != 2 {
		t.Fatalf("%d uploads, want 2", n)
	}
}

// TestUploadDelayIsBounded: a directory written without a pause holds
// its uploads at most delayCap delays.
func TestUploadDelayIsBounded(t *testing.T) {
	const delay = 50 * time.Millisecond
	e := newDelayedEnv(t, delay)
	if _, err := e.m.Commit(context.Background(), "busy/a", e.stageAt(t, "busy/a", []byte("a")), "", 1); err != nil {
		t.Fatal(err)
	}
	log := e.stageAt(t, "busy/log", []byte("never closed"))
	defer log.Discard()
	waitObject(t, e.bucket, "busy/a", "a", 10*time.Second)
}

// TestUploadDelayEndsOnRequest: WaitKey (fsync), WaitAll (strata sync,
// unmount) and Retry start delayed uploads at once.
func TestUploadDelayEndsOnRequest(t *testing.T) {
	e := newDelayedEnv(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range []string{"d/fsynced", "d/synced", "d/retried"} {
		if _, err := e.m.Commit(ctx, k, e.stageAt(t, k, []byte(k)), "", 1); err != nil {
			t.Fatal(err)
		}
	}
	if u := e.m.Uploads(); len(u) != 3 || u[0].State != StateDelayed {
		t.Fatalf("uploads listed as %+v, want 3 delayed", u)
	}
	if _, err := e.m.Retry("d/retried"); err != nil {
		t.Fatal(err)
	}
	waitObject(t, e.bucket, "d/retried", "d/retried", 10*time.Second)
	if err := e.m.WaitKey(ctx, "d/fsynced"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.bucket.get("d/fsynced"); !ok {
		t.Fatal("WaitKey returned before the upload")
	}
	if _, err := e.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.bucket.get("d/synced"); !ok {
		t.Fatal("WaitAll returned before the upload")
	}
}

// TestSyncStartsDelayedUploadsWhileWaitingForHolds: strata sync starts
// the delayed uploads of closed files at once, also while it waits for a
// file still open to be let go (heldReleaseWait), not after that wait.
func TestSyncStartsDelayedUploadsWhileWaitingForHolds(t *testing.T) {
	e := newDelayedEnv(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.m.Commit(ctx, "d/closed", e.stageAt(t, "d/closed", []byte("closed")), "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.CommitHeld(ctx, "d/open", e.stageAt(t, "d/open", []byte("still open")), "", 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := e.m.WaitAll(ctx); err != nil {
			t.Error(err)
		}
	}()
	for {
		if _, ok := e.bucket.get("d/closed"); ok {
			break
		}
		select {
		case <-done:
			t.Fatal("the closed file's delayed upload started only once sync had given up waiting for the open one")
		case <-time.After(5 * time.Millisecond):
		}
	}
	<-done
	if _, ok := e.bucket.get("d/open"); ok {
		t.Fatal("a file still open was uploaded")
	}
}
