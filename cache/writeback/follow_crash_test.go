package writeback

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// lateAnswerBucket lands its first Put in the bucket and answers it only
// once the upload is stopped: a request that had reached the server when
// a newer commit stopped it (backend.PutOptions.Stop).
type lateAnswerBucket struct {
	*fakeBucket
	first atomic.Bool
	began chan struct{} // closed once the first Put has landed
}

func (b *lateAnswerBucket) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	if !b.first.CompareAndSwap(false, true) {
		return b.fakeBucket.Put(ctx, key, r, size, opt)
	}
	stop := opt.Stop
	opt.Stop = nil
	info, err := b.fakeBucket.Put(context.Background(), key, r, size, opt)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	close(b.began)
	select {
	case <-stop:
		return info, nil
	case <-ctx.Done():
		return backend.ObjectInfo{}, ctx.Err()
	}
}

// TestSupersededUploadThatLandedAnywayIsFollowed: a rewrite supersedes an
// upload already under way, whose request lands although it was stopped.
// The rewrite, conditional on what the first upload started from, must
// not take our own landed upload for another node's object: it goes up,
// and the bucket holds the newest close.
func TestSupersededUploadThatLandedAnywayIsFollowed(t *testing.T) {
	fb := newBucket()
	fb.objs["k"], fb.vers["k"] = []byte("before"), "v0"
	b := &lateAnswerBucket{fakeBucket: fb, began: make(chan struct{})}
	e := openEnv(t, b, fb, "", func(o *Options) { o.Mode = Async })
	commitAsync(t, e, "k", []byte("second, superseded"), "v0")
	<-b.began
	j2 := commitAsync(t, e, "k", []byte("third, the last close"), "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j2.Wait(ctx); err != nil {
		got, _ := fb.get("k")
		t.Fatalf("the last close's upload failed: %v; the bucket holds %q", err, got)
	}
	if got, _ := fb.get("k"); string(got) != "third, the last close" {
		t.Fatalf("the bucket holds %q, not the last close", got)
	}
}

// gatedBucket holds its first Put until gate is closed, whatever its
// context says, then lands it: a request past the point of no return.
type gatedBucket struct {
	*fakeBucket
	first   atomic.Bool
	gate    chan struct{}
	entered chan struct{} // closed when the first Put starts
}

func (b *gatedBucket) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	if b.first.CompareAndSwap(false, true) {
		close(b.entered)
		<-b.gate
		ctx, opt.Stop = context.Background(), nil
	}
	return b.fakeBucket.Put(ctx, key, r, size, opt)
}

// TestJournalKeepsTheFollowersBaseWhileAnUploadSettles: from the moment an
// upload is complete in the bucket, the journal must let a restart (kill
// -9 now) upload the rewrite that follows it, committed before or after
// the upload landed: either the first upload's entry is still there (the
// next mount recognises it as landed) or the rewrite's entry is
// conditional on the version it created. Else the next mount takes our
// own object for another node's and reports a false conflict.
func TestJournalKeepsTheFollowersBaseWhileAnUploadSettles(t *testing.T) {
	for _, rewriteFirst := range []bool{true, false} {
		fb := newBucket()
		fb.objs["k"], fb.vers["k"] = []byte("v1"), "v1"
		b := &gatedBucket{fakeBucket: fb, gate: make(chan struct{}), entered: make(chan struct{})}
		e := openEnv(t, b, fb, "", func(o *Options) { o.Mode = Async })
		e.upserted = make(chan struct{}) // a landed upload waits to settle
		commitAsync(t, e, "k", []byte("mine, first"), "v1")
		<-b.entered
		if rewriteFirst {
			commitAsync(t, e, "k", []byte("mine, second"), "")
		}
		close(b.gate)
		landed := ""
		for deadline := time.Now().Add(10 * time.Second); landed == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if got, _ := fb.get("k"); string(got) == "mine, first" {
				fb.mu.Lock()
				landed = fb.vers["k"]
				fb.mu.Unlock()
			}
		}
		if !rewriteFirst {
			commitAsync(t, e, "k", []byte("mine, second"), "")
		}
		time.Sleep(100 * time.Millisecond) // the attempt reaches the held Upsert
		first, followerBase := false, ""
		err := e.m.ix.ScanUploads(func(_ uint64, r index.UploadRecord, err error) error {
			switch {
			case err != nil:
			case r.Size == int64(len("mine, first")):
				first = true
			default:
				followerBase = r.BaseVersion
			}
			return nil
		})
		close(e.upserted)
		if err != nil {
			t.Fatal(err)
		}
		if landed == "" {
			t.Fatal("the first upload never landed")
		}
		if !first && followerBase != landed {
			t.Fatalf("rewrite committed first %v: a kill -9 now leaves it conditional on %q while the bucket holds our own upload %q: the next mount reports a false conflict", rewriteFirst, followerBase, landed)
		}
		e.close()
	}
}
