package writeback

import (
	"context"
	"testing"
	"time"
)

// TestWaitAllWaitsForASessionPublishedAtRelease: a file a close left
// dirty without publishing it (`: > file`: open(O_TRUNC) closed with no
// write) goes up at its last RELEASE, which the kernel sends after
// close() has returned. A `strata sync` in between found no upload to
// wait for; the session is marked at that close (PublishAtRelease), and
// WaitAll waits for its commit, then for its upload. The commit is slow
// to journal here (a gate on the bucket is not enough: the window is
// between the session's end and its job's upload), and held, as the
// filesystem's is until it lets the name go.
func TestWaitAllWaitsForASessionPublishedAtRelease(t *testing.T) {
	b := newBucket()
	e := newEnv(t, Async, b, "")
	ctx := context.Background()
	st := e.stageAt(t, "k", []byte("truncated, then released"))
	st.PublishAtRelease()
	go func() {
		time.Sleep(200 * time.Millisecond) // the RELEASE, late
		if _, err := e.m.CommitHeld(ctx, "k", st, "", 1); err != nil {
			t.Error(err)
		}
		time.Sleep(100 * time.Millisecond)
		e.m.Unhold("k")
	}()
	if _, err := e.m.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("k"); !ok || string(got) != "truncated, then released" {
		t.Fatalf("WaitAll returned before the upload of a session published at its release: bucket %q %v", got, ok)
	}
}

// TestWaitAllBoundsItsWaitForASessionKeptOpen: a session published at
// its release that another descriptor really keeps open is waited for
// only up to heldReleaseWait, as a held upload is.
func TestWaitAllBoundsItsWaitForASessionKeptOpen(t *testing.T) {
	defer func(w time.Duration) { heldReleaseWait = w }(heldReleaseWait)
	heldReleaseWait = 100 * time.Millisecond
	e := newEnv(t, Async, newBucket(), "")
	st := e.stageAt(t, "k", []byte("still open"))
	st.PublishAtRelease()
	defer st.Discard()
	done := make(chan error, 1)
	go func() { _, err := e.m.WaitAll(context.Background()); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitAll still waits for a session kept open, 5 s on")
	}
}
