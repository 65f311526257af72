package backend

import (
	"errors"
	"testing"
	"time"
)

// A call sent while the backend was down and failing after it came back
// must not reopen the breaker.
func TestBreakerIgnoresStaleFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBreaker(time.Second, nil, func() time.Time { return now })
	sentWhileDown := now
	b.Done(false, now, ErrUnavailable)
	now = now.Add(2 * time.Second)
	probe, err := b.Allow()
	if !probe || err != nil {
		t.Fatalf("after cooldown: probe=%v err=%v", probe, err)
	}
	b.Done(probe, now, nil)
	now = now.Add(time.Millisecond)
	b.Done(false, sentWhileDown, ErrUnavailable)
	if _, err := b.Allow(); err != nil {
		t.Fatalf("a stale failure reopened the breaker: %v", err)
	}
	b.Done(false, now, ErrUnavailable)
	if _, err := b.Allow(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a fresh failure did not open the breaker: %v", err)
	}
}

// Only the errors the breaker was given open it.
func TestBreakerOpensOnChosenErrors(t *testing.T) {
	b := NewBreaker(time.Second, func(err error) bool { return errors.Is(err, ErrNoBucket) }, nil)
	b.Done(false, b.Now(), ErrNotExist)
	b.Done(false, b.Now(), ErrUnavailable)
	if _, err := b.Allow(); err != nil {
		t.Fatalf("opened by an error it was not given: %v", err)
	}
	b.Done(false, b.Now(), ErrNoBucket)
	if _, err := b.Allow(); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("not opened by ErrNoBucket: %v", err)
	}
	b.Expire()
	if probe, err := b.Allow(); !probe || err != nil {
		t.Fatalf("after Expire: probe=%v err=%v", probe, err)
	}
	if _, err := b.Allow(); err == nil {
		t.Fatal("a second call went out while the probe was in flight")
	}
}
