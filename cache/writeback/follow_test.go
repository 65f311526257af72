package writeback

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// commitAsync commits data as key in async mode (returns once journaled).
func commitAsync(t *testing.T, e *env, key string, data []byte, base string) *Job {
	t.Helper()
	j, err := e.m.Commit(context.Background(), key, e.stage(t, data), base, 1)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestRewriteWhilePendingFollowsThePendingUpload: a file rewritten on
// this mount before its first upload landed (the filesystem commits the
// rewrite with no base) uploads conditionally on what the first upload
// started from: another node's object put in between is never replaced.
func TestRewriteWhilePendingFollowsThePendingUpload(t *testing.T) {
	b := newBucket()
	b.objs["k"], b.vers["k"] = []byte("v1"), "v1"
	b.gate = make(chan struct{})
	e := newEnv(t, Async, b, "")
	commitAsync(t, e, "k", []byte("mine, first"), "v1")
	j2 := commitAsync(t, e, "k", []byte("mine, second"), "")
	b.mu.Lock()
	b.objs["k"], b.vers["k"] = []byte("other node"), "v2"
	b.mu.Unlock()
	close(b.gate)
	if err := j2.Wait(context.Background()); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("rewrite over another node's object: %v (want a conflict)", err)
	}
	if got, _ := b.get("k"); string(got) != "other node" {
		t.Fatalf("the bucket holds %q: the rewrite replaced another node's object", got)
	}
}

// TestRewriteFollowsItsOwnLandedUpload: when the first upload lands while
// the rewrite waits behind it, the rewrite is conditional on the version
// the first one created: it goes up (no false conflict with our own
// upload), and a later object from another node still stops it.
func TestRewriteFollowsItsOwnLandedUpload(t *testing.T) {
	for _, other := range []bool{false, true} {
		b := newBucket()
		b.objs["k"], b.vers["k"] = []byte("v1"), "v1"
		e := newEnvHoldingUpserts(t, b) // the first upload lands and waits to settle
		j1 := commitAsync(t, e, "k", []byte("mine, first"), "v1")
		for b.puts.Load() == 0 { // the first attempt is under way
			time.Sleep(time.Millisecond)
		}
		j2 := commitAsync(t, e, "k", []byte("mine, second"), "")
		close(e.upserted)
		if err := j1.Wait(context.Background()); err != nil && !errors.Is(err, errSuperseded) {
			t.Fatal(err)
		}
		if other {
			b.mu.Lock()
			b.objs["k"], b.vers["k"] = []byte("other node"), "v3"
			b.mu.Unlock()
		}
		err := j2.Wait(context.Background())
		got, _ := b.get("k")
		switch {
		case !other && (err != nil || !bytes.Equal(got, []byte("mine, second"))):
			t.Fatalf("rewrite after our own upload landed: %v, bucket %q", err, got)
		case other && !errors.Is(err, backend.ErrPreconditionFailed):
			// The other node's put may also come after the rewrite landed:
			// then the bucket holds it and nothing was replaced.
			if err != nil || string(got) != "other node" {
				t.Fatalf("rewrite vs another node: %v, bucket %q", err, got)
			}
		}
		e.close()
	}
}
