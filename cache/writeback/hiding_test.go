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
