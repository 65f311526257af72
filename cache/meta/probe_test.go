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

// TestLookupOfASilentEndpointEnds: an endpoint that accepts connections
// and never answers. README promises that the first lookup that finds it
// gone fails (EIO) within 10 s and opens the breaker, and that the probe
// finds it back by itself. Before the fix only the backend's own
// timeouts bounded a lookup (with S3, 5 attempts of 30 s: 2.5 minutes),
// and the probe as well.
func TestLookupOfASilentEndpointEnds(t *testing.T) {
	ctx := context.Background()
	be := newFake(100, "a")
	o := DefaultOptions()
	o.Clock = time.Now
	o.ResponseTimeout = 300 * time.Millisecond
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)

	be.silent.Store(true)
	start := time.Now()
	_, err := c.Lookup(ctx, "", "b")
	if took := time.Since(start); !errors.Is(err, backend.ErrUnavailable) || took > 5*time.Second {
		t.Fatalf("lookup with the endpoint silent: %v after %v, want ErrUnavailable after about %v", err, took, o.ResponseTimeout)
	}
	if c.health.Err() == nil {
		t.Fatal("the breaker is closed after a lookup found the endpoint silent")
	}
	be.silent.Store(false)
	be.put("b", 1, "v1")
	for deadline := time.Now().Add(10 * time.Second); c.health.Err() != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Lookup(ctx, "", "b"); err != nil {
		t.Fatalf("lookup once the endpoint answers again: %v", err)
	}
}

// TestLookupOutlivesALostRequest: a live endpoint whose answer to one of
// a lookup's requests is lost (a stalled connection: the request waits
// for its 30 s attempt timeout) still answers the lookup, within the
// lookup's bound, and the breaker stays closed. Before the fix the lookup
// waited out the bound on the lost request and failed with EIO
// (TestReadsUnderNetworkFaults failed so once in a make test run: a
// lookup's one-key LIST stalled by its fault proxy).
func TestLookupOutlivesALostRequest(t *testing.T) {
	ctx := context.Background()
	be := newFake(100, "a", "d/x")
	o := DefaultOptions()
	o.Clock = time.Now
	o.ResponseTimeout = 2 * time.Second
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)

	for _, name := range []string{"a", "d", "missing"} {
		be.stalls.Store(1) // the lookup's first request: its HEAD or its LIST
		start := time.Now()
		e, err := c.Lookup(ctx, "", name)
		took := time.Since(start)
		switch {
		case name == "missing" && !errors.Is(err, backend.ErrNotExist),
			name != "missing" && err != nil:
			t.Fatalf("lookup of %s with one request lost: %v after %v", name, err, took)
		case name == "d" && !e.Dir:
			t.Fatalf("lookup of d: %+v, want a directory", e)
		case took >= o.ResponseTimeout:
			t.Fatalf("lookup of %s took %v, the whole bound", name, took)
		}
		if c.health.Err() != nil {
			t.Fatalf("the breaker opened for one lost request: %v", c.health.Err())
		}
	}
}

// TestListingOfASilentEndpointEnds: the first request to meet an endpoint
// that never answers is a listing page. A page is bounded only by the
// backend's own timeouts (30 s an attempt with S3: 2.5 minutes), so
// before the fix the listing waited for them; now a probe bounded like a
// lookup goes beside a page that has no answer after pageProbeAfter, and
// its silence fails the page with ErrUnavailable (opening the breaker).
func TestListingOfASilentEndpointEnds(t *testing.T) {
	be := newFake(100, "d/a")
	o := DefaultOptions()
	o.Clock = time.Now
	o.ResponseTimeout = 300 * time.Millisecond
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)

	be.silent.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := c.ListAhead("d/")(ctx)
	if took := time.Since(start); !errors.Is(err, backend.ErrUnavailable) || took > 5*time.Second {
		t.Fatalf("listing with the endpoint silent: %v after %v, want ErrUnavailable after about %v", err, took, pageProbeAfter+o.ResponseTimeout)
	}
	if c.health.Err() == nil {
		t.Fatal("the breaker is closed after a listing found the endpoint silent")
	}
}

// slowPages holds every listing back for delay, a one-key LIST as well:
// a live endpoint listing a big directory slowly, or a file:// source,
// where a one-key LIST reads the whole directory too.
type slowPages struct {
	*fakeBackend
	delay time.Duration
}

func (s slowPages) List(ctx context.Context, prefix string, o backend.ListOptions) (backend.ListPage, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return backend.ListPage{}, ctx.Err()
	}
	return s.fakeBackend.List(ctx, prefix, o)
}

// TestSlowListingPageOfALiveEndpointGoesOn: a page slower than the probe's
// bound is not given up while the endpoint answers the probe. The probe
// was a one-key LIST: on a file:// source that is as slow as the page
// (a cold directory of 500,000 files), and the ls failed with EIO.
func TestSlowListingPageOfALiveEndpointGoesOn(t *testing.T) {
	be := slowPages{newFake(100, "d/a", "d/b"), 4 * (pageProbeAfter + 300*time.Millisecond)}
	o := DefaultOptions()
	o.Clock = time.Now
	o.ResponseTimeout = 300 * time.Millisecond
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)

	if err := c.ListAhead("d/")(context.Background()); err != nil {
		t.Fatalf("a slow listing page of a live endpoint: %v", err)
	}
	if _, err := c.Lookup(context.Background(), "d/", "b"); err != nil {
		t.Fatalf("lookup from that listing: %v", err)
	}
	before := be.stats.Load() // the probes' HEADs
	if _, err := c.Lookup(context.Background(), "d/", "a"); err != nil {
		t.Fatalf("lookup from that listing: %v", err)
	}
	if n := be.stats.Load() - before; n != 0 {
		t.Errorf("a lookup sent %d HEADs: the listing should answer it", n)
	}
}
