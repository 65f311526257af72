package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestBucketBackFoundWithoutACaller: once lookups found the backend down,
// the README promises a probe in the background, once a second, that finds
// it back "and lookups work again by themselves". Before the fix the probe
// ran only when a lookup came: after an outage that ended minutes ago, the
// first lookup still failed at once with the old error (a file added
// meanwhile was ENOENT from the stale listing, or EIO), and only a later
// one went through.
func TestBucketBackFoundWithoutACaller(t *testing.T) {
	ctx := context.Background()
	be := newFake(100, "a")
	o := DefaultOptions()
	o.TTL = time.Second
	o.Clock = time.Now
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)

	be.down.Store(true)
	if _, err := c.Lookup(ctx, "", "b"); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("lookup with the backend down: %v, want ErrUnavailable", err)
	}
	be.down.Store(false)
	be.put("b", 1, "v1")

	// No lookup meanwhile: the background probe alone must close the
	// breaker (it probes once a second; 10 s is plenty on a loaded machine).
	for deadline := time.Now().Add(10 * time.Second); c.health.Err() != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Lookup(ctx, "", "b"); err != nil {
		t.Fatalf("first lookup after the backend came back (and was probed for 10 s): %v, want the file", err)
	}
}
