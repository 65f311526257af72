package shared

import (
	"sync"
	"time"
)

// breaker takes the tier out of the read path while it fails. Closed, it
// counts consecutive failures; threshold of them open it for cooldown.
// After that one read probes the tier: success closes the breaker, failure
// opens it again for twice as long (up to maxCooldown). Writes go to the
// tier only while it is closed.
type breaker struct {
	threshold             int
	cooldown, maxCooldown time.Duration
	now                   func() time.Time
	// onChange is called (without the lock) when the breaker opens
	// (true) or closes (false).
	onChange func(open bool, reason error)

	mu       sync.Mutex
	fails    int           // consecutive failures while closed
	open     bool          // open or half-open
	until    time.Time     // while open: when a probe may go
	backoff  time.Duration // current cooldown
	probing  bool          // a probe is out
	lastFail error
}

func newBreaker(threshold int, cooldown, maxCooldown time.Duration, onChange func(bool, error)) *breaker {
	if onChange == nil {
		onChange = func(bool, error) {}
	}
	return &breaker{threshold: max(threshold, 1), cooldown: cooldown, maxCooldown: max(maxCooldown, cooldown),
		now: time.Now, onChange: onChange}
}

// allow says whether a read may use the tier; probe means this read is
// the one probing a half-open breaker and must report with probe set.
func (b *breaker) allow() (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true, false
	}
	if b.probing || b.now().Before(b.until) {
		return false, false
	}
	b.probing = true
	return true, true
}

// closed reports whether the tier is in use (writes, and the lookups of
// a read other than the probe).
func (b *breaker) closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.open
}

// success records a tier request that worked (a miss is a success).
func (b *breaker) success(probe bool) {
	b.mu.Lock()
	b.fails = 0
	if !probe || !b.open {
		if probe {
			b.probing = false
		}
		b.mu.Unlock()
		return
	}
	b.open, b.probing, b.backoff = false, false, 0
	b.mu.Unlock()
	b.onChange(false, nil)
}

// failure records a tier request that failed or was too slow.
func (b *breaker) failure(probe bool, err error) {
	b.mu.Lock()
	b.lastFail = err
	switch {
	case probe && b.open:
		b.probing = false
		b.backoff = min(2*b.backoff, b.maxCooldown)
		b.until = b.now().Add(b.backoff)
		b.mu.Unlock()
		return
	case b.open:
		b.mu.Unlock()
		return
	}
	b.fails++
	if b.fails < b.threshold {
		b.mu.Unlock()
		return
	}
	b.tripLocked()
	b.mu.Unlock()
	b.onChange(true, err)
}

// trip opens the breaker now (the tier was found down at mount).
func (b *breaker) trip(err error) {
	b.mu.Lock()
	if b.open {
		b.mu.Unlock()
		return
	}
	b.lastFail = err
	b.tripLocked()
	b.mu.Unlock()
	b.onChange(true, err)
}

func (b *breaker) tripLocked() {
	b.open, b.fails, b.probing = true, 0, false
	b.backoff = b.cooldown
	b.until = b.now().Add(b.backoff)
}

// abandon gives up a probe that ended without an answer (the caller
// cancelled): the next read may probe.
func (b *breaker) abandon(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}
