package writeback

import (
	"context"
	"testing"
	"time"
)

// TestOvertakenUploadHidesItsNameUntilTakenDown: a file deleted, or
// renamed, or a new file's upload discarded (strata uploads --discard),
// while its upload is in flight (its object already in the
// bucket, the answer not back) is hidden from the namespace under its old
// name until the attempt has ended and taken that object down, and not
// before nor after: a listing fetched in between would show a name no
// file has, and rmdir of its directory would find it not empty.
func TestOvertakenUploadHidesItsNameUntilTakenDown(t *testing.T) {
	for _, how := range []string{"delete", "rename", "discard"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Its answer held; released before the manager closes (t.Cleanup),
			// which waits for the upload.
			e, b, release := inFlight(t, "ckpt/model.bin", []byte("weights"))
			defer release()
			if _, hidden := e.hidden.Load("ckpt/model.bin"); hidden {
				t.Fatal("hidden before anything overtook its upload")
			}
			discarded := make(chan error, 1)
			switch how {
			case "delete":
				e.m.Cancel("ckpt/model.bin")
			case "rename":
				if _, err := e.m.Rekey("ckpt/model.bin", "model.bin", ""); err != nil {
					t.Fatal(err)
				}
			case "discard": // it waits for the attempt to end
				go func() { _, err := e.m.Discard(ctx, "ckpt/model.bin"); discarded <- err }()
				for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if _, hidden := e.hidden.Load("ckpt/model.bin"); hidden {
						break
					}
				}
			}
			if _, hidden := e.hidden.Load("ckpt/model.bin"); !hidden {
				t.Fatalf("after the %s the old name's object is in the bucket and not hidden", how)
			}
			release()
			if how == "discard" {
				if err := <-discarded; err != nil {
					t.Fatalf("discard of a new file's upload in flight: %v", err)
				}
			}
			if how == "rename" {
				if err := e.m.WaitKey(ctx, "model.bin"); err != nil {
					t.Fatal(err)
				}
			}
			for {
				_, inBucket := b.get("ckpt/model.bin")
				_, hidden := e.hidden.Load("ckpt/model.bin")
				if !inBucket && !hidden {
					break
				}
				if !inBucket && hidden {
					// taken down; the attempt ends next
				} else if !hidden {
					t.Fatal("no longer hidden while the old name's object is still in the bucket")
				}
				if ctx.Err() != nil {
					t.Fatalf("in the bucket %v, hidden %v: the attempt never ended", inBucket, hidden)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// TestNoHidingOnceTheAttemptIsOver: once an attempt's upload has returned
// (and taken down what it landed under a name the file no longer has),
// nothing more of it can land, so a rename that comes while the attempt
// is being recorded hides nothing: a hiding begun then was ended only
// after the key's next upload could start, and its Unhide (which records
// the name as gone) could land after that upload's entry.
func TestNoHidingOnceTheAttemptIsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, _, release := inFlight(t, "a", []byte("weights"))
	defer release()
	if _, err := e.m.Rekey("a", "b", ""); err != nil { // hides a
		t.Fatal(err)
	}
	e.unhiding, e.unhidden = make(chan string), make(chan struct{})
	release() // a lands, is taken down; the attempt ends: Unhide(a)
	select {
	case k := <-e.unhiding:
		if k != "a" {
			t.Fatalf("Unhide(%q), want a", k)
		}
	case <-ctx.Done():
		t.Fatal("the attempt never ended its hiding")
	}
	before := e.hides.Load()
	if _, err := e.m.Rekey("b", "c", ""); err != nil { // the job is still marked running
		t.Fatal(err)
	}
	after := e.hides.Load()
	go func() { // any later Unhide goes through at once
		for range e.unhiding {
			e.unhidden <- struct{}{}
		}
	}()
	e.unhidden <- struct{}{}
	if err := e.m.WaitKey(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("a rename after the attempt's upload had returned hid its old name (%d Hide calls)", after-before)
	}
}
