package prefetch

import (
	"errors"
	"sync"
	"time"

	"github.com/stratafs/strata/backend"
)

// breaker fails fetches fast while the backend is known to be down. The
// backend returns ErrUnavailable only after its own retries are spent, so
// one such failure is strong evidence; without this every pending read
// (and the kernel retries each failed readahead page synchronously) would
// pay the whole retry budget again. After cooldown one fetch probes; its
// success closes the breaker.
type breaker struct {
	cooldown time.Duration
	now      func() time.Time

	mu      sync.Mutex
	lastErr error     // the failure that opened the breaker, nil when closed
	since   time.Time // when it opened (or the last probe failed)
	probing bool
}

// allow returns nil if a fetch may go to the backend, or the error to fail
// it with now. A true probe means the caller must report via done.
func (b *breaker) allow() (probe bool, err error) {
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

// done records a fetch outcome.
func (b *breaker) done(probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch {
	case err == nil:
		b.lastErr = nil
	case errors.Is(err, backend.ErrUnavailable):
		b.lastErr, b.since = err, b.now()
	}
}
