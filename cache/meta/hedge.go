package meta

import (
	"context"
	"time"
)

// hedgeAttempts is how many times a lookup is asked within its bound
// (Options.ResponseTimeout): once at first, again each time a quarter of
// the bound passes with no answer.
const hedgeAttempts = 4

// hedged runs attempt, and runs it again beside the ones in flight each
// time every passes with none of them answered, up to hedgeAttempts in
// all; the first to answer (a result or an error of the backend's own)
// wins (an attempt reports its own errors in its T) and the others are
// cancelled. A request whose answer the network
// lost waits for its attempt timeout (30 s for an S3 HEAD or LIST), far
// past a lookup's bound: one lost request must not fail a lookup that a
// second request answers at once, while an endpoint that answers nothing
// still fails it within the bound (answerWithin cancels ctx). every <= 0
// (no bound) runs attempt once.
func hedged[T any](ctx context.Context, every time.Duration, attempt func(context.Context) T) T {
	if every <= 0 {
		return attempt(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan T, hedgeAttempts)
	start := func() { go func() { answers <- attempt(ctx) }() }
	start()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for sent := 1; ; {
		select {
		case a := <-answers:
			return a
		case <-tick.C:
			if sent < hedgeAttempts {
				start()
				sent++
			}
		case <-ctx.Done():
			// Every attempt ends with ctx: take the first one's answer.
			return <-answers
		}
	}
}
