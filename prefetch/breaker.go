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
	closed  time.Time // when a fetch last succeeded
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

// done records the outcome of a fetch that started at started. A failure
// of a fetch that started before the last success is old news (it was
// sent while the backend was down) and does not reopen the breaker.
func (b *breaker) done(probe bool, started time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch {
	case err == nil:
		b.lastErr, b.closed = nil, b.now()
	case errors.Is(err, backend.ErrUnavailable) && !started.Before(b.closed):
		b.lastErr, b.since = err, b.now()
	}
}
