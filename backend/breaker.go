package backend

import (
	"errors"
	"sync"
	"time"
)

// Breaker fails calls fast while the backend is known to be down. A
// backend returns ErrUnavailable only after its own retries are spent, so
// one such failure is strong evidence; without a breaker every pending
// call (a read, and the kernel retries each failed readahead page
// synchronously; a lookup, one per path component) would pay the whole
// retry budget again. After Cooldown one call probes; its success closes
// the breaker. The data path (prefetch) and the metadata path
// (cache/meta) each keep one.
type Breaker struct {
	cooldown time.Duration
	opens    func(error) bool
	now      func() time.Time

	mu      sync.Mutex
	lastErr error     // the failure that opened the breaker, nil when closed
	since   time.Time // when it opened (or the last probe failed)
	probing bool
	closed  time.Time // when a call last succeeded
}

// NewBreaker returns a closed breaker that opens on the errors opens
// accepts (nil: ErrUnavailable) and probes once every cooldown while
// open. now is the clock (nil: time.Now).
func NewBreaker(cooldown time.Duration, opens func(error) bool, now func() time.Time) *Breaker {
	if opens == nil {
		opens = func(err error) bool { return errors.Is(err, ErrUnavailable) }
	}
	if now == nil {
		now = time.Now
	}
	return &Breaker{cooldown: cooldown, opens: opens, now: now}
}

// Now is the breaker's clock: callers take a call's start time from it.
func (b *Breaker) Now() time.Time { return b.now() }

// Allow returns nil if a call may go to the backend, or the error to fail
// it with now. A true probe means the caller must report it via Done.
func (b *Breaker) Allow() (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastErr == nil {
		return false, nil
	}
	if b.probing || b.now().Sub(b.since) < b.cooldown {
		return false, b.lastErr
	}
	b.probing = true
	return true, nil
}

// Done records the outcome of a call that started at started. A failure
// of a call that started before the last success is old news (it was sent
// while the backend was down) and does not reopen the breaker.
func (b *Breaker) Done(probe bool, started time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch {
	case err == nil:
		b.lastErr, b.closed = nil, b.now()
	case b.opens(err) && !started.Before(b.closed):
		b.lastErr, b.since = err, b.now()
	}
}

// Err is the failure that holds the breaker open (nil: closed).
func (b *Breaker) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

// Expire ends the cooldown now: the next call probes.
func (b *Breaker) Expire() {
	b.mu.Lock()
	b.since = time.Time{}
	b.mu.Unlock()
}
