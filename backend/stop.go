package backend

import (
	"context"
	"errors"
)

// ErrStopped: an upload was given up at PutOptions.Stop before the
// request that would make its object visible was sent; nothing appeared.
var ErrStopped = errors.New("upload stopped before it was sent")

// Stopped reports whether stop is closed (a nil stop never is).
func Stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// WithStop returns a context that is also cancelled, with ErrStopped as
// its cause, when stop closes: for the requests of an upload that may
// be given up (its parts, the chunks before the last). The request that
// makes the object visible must not use it (see PutOptions.Stop). cancel
// releases the watch.
func WithStop(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if stop != nil {
		go func() {
			select {
			case <-stop:
				cancel(ErrStopped)
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(context.Canceled) }
}
