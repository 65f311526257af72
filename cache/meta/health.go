package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratafs/strata/backend"
)

// healthCooldown is how often the metadata breaker probes the backend
// while it is open.
const healthCooldown = time.Second

// allowBackend returns nil if a lookup or listing may go to the backend,
// or the error to fail it with at once. While the backend is known to be
// down no caller waits on it: the probe that looks for it once a second
// runs in the background (probeLoop), and its success lets the next
// callers through.
func (c *Cache) allowBackend() (time.Time, error) {
	probe, err := c.health.Allow()
	if err != nil {
		c.watchHealth()
		return time.Time{}, err
	}
	if probe {
		// The background loop was not due yet (or is not running): probe
		// now, still without making the caller wait.
		c.loads.Add(1)
		go func() {
			defer c.loads.Done()
			c.probeOnce()
		}()
		if err := c.health.Err(); err != nil {
			return time.Time{}, err
		}
	}
	return c.health.Now(), nil
}

// backendDone records the outcome of a lookup or listing request sent at
// sent; a failure that opens the breaker starts the background probe.
func (c *Cache) backendDone(sent time.Time, err error) {
	c.health.Done(false, sent, err)
	if err != nil {
		c.watchHealth()
	}
}

// watchHealth starts the background probe if the breaker is open and no
// probe loop runs. Without it the breaker would only be probed when a
// caller came, and the first caller after an outage that ended long ago
// would still get the outage's error (a new file ENOENT from a stale
// listing, or EIO).
func (c *Cache) watchHealth() {
	if c.health.Err() == nil || c.ctx.Err() != nil || !c.probing.CompareAndSwap(false, true) {
		return
	}
	c.loads.Add(1)
	go func() {
		defer c.loads.Done()
		c.probeLoop()
	}()
}

// probeLoop probes the backend once every healthCooldown until the
// breaker closes or the cache is closed.
func (c *Cache) probeLoop() {
	for {
		t := time.NewTimer(healthCooldown)
		select {
		case <-c.ctx.Done():
			t.Stop()
			c.probing.Store(false)
			return
		case <-t.C:
		}
		if probe, _ := c.health.Allow(); probe {
			c.probeOnce()
		}
		if c.health.Err() != nil {
			continue
		}
		c.probing.Store(false)
		// Reopened between the check and the store: keep probing.
		if c.health.Err() == nil || !c.probing.CompareAndSwap(false, true) {
			return
		}
	}
}

// probeOnce sends the breaker's probe (a one-key LIST of the source) and
// reports it; Allow must have answered probe. It is bounded like a
// lookup: a probe stuck on a connection that went silent would otherwise
// hold the breaker open for every attempt's timeout after the endpoint
// came back.
func (c *Cache) probeOnce() {
	sent := c.health.Now()
	err := c.answerWithin(c.ctx, "probe", func(ctx context.Context) error {
		_, err := c.be.List(ctx, "", backend.ListOptions{Limit: 1})
		return err
	})
	c.health.Done(true, sent, err)
}

// answerWithin runs fn, cancelling it once Options.ResponseTimeout has
// passed; an error after that is ErrUnavailable (it opens the breaker).
// Without it an endpoint that accepts connections and never answers held
// the first lookup for every attempt of every request: 5 of 30 s each
// with S3, 2.5 minutes (TestLookupsWithTheBackendGone/blackhole).
func (c *Cache) answerWithin(ctx context.Context, what string, fn func(context.Context) error) error {
	d := c.opts.ResponseTimeout
	if d <= 0 {
		return fn(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(d, cancel)
	err := fn(ctx)
	if timer.Stop() || err == nil {
		return err
	}
	return fmt.Errorf("meta: %s: no answer within %s: %w (%v)", what, d, backend.ErrUnavailable, err)
}

// pageProbeAfter is how long a listing page may go unanswered before the
// endpoint is asked a one-key question beside it (listWatched).
const pageProbeAfter = 500 * time.Millisecond

// pageProbeName is the name that question asks for, beside the page's
// prefix: a HEAD of a key nobody writes (a 404 is an answer), an lstat on a
// file:// source. Not a one-key LIST: on a file:// source that reads the
// whole directory, as slow as the page it watches (a directory of 500,000
// files, cold: the probe ran past its bound and the ls failed with EIO).
const pageProbeName = ".strata-probe"

// listWatched sends one listing page. A page gets the backend's own
// timeouts (30 s an attempt: a page of a big directory can be slow to
// come), so an endpoint that accepts connections and never answers held
// the first listing to meet it for every attempt, 2.5 minutes on S3
// (TestListingWithTheEndpointSilent). A page that has no answer after
// pageProbeAfter is watched by a one-key question, bounded as a lookup is
// (answerWithin): a live endpoint answers that at once and the page goes
// on waiting; if it goes unanswered too the backend is gone, and the page
// fails with ErrUnavailable (which opens the breaker).
func (c *Cache) listWatched(ctx context.Context, prefix string, o backend.ListOptions) (backend.ListPage, error) {
	if c.opts.ResponseTimeout <= 0 {
		return c.be.List(ctx, prefix, o)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.loads.Add(1) // callers run in a counted load or prefetch worker: never a late Add
	go func() {
		defer c.loads.Done()
		t := time.NewTimer(pageProbeAfter)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.answerWithin(ctx, "probe beside a listing page", func(ctx context.Context) error {
			_, err := c.be.Stat(ctx, prefix+pageProbeName)
			return err
		})
		if backendGone(err) {
			cancel(err)
		}
	}()
	page, err := c.be.List(ctx, prefix, o)
	if cause := context.Cause(ctx); err != nil && backendGone(cause) {
		err = fmt.Errorf("the endpoint answers nothing: %w", cause)
	}
	return page, err
}

// backendGone: errors that open the metadata breaker.
func backendGone(err error) bool {
	return errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrNoBucket)
}
