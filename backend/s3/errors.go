package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stratafs/strata/backend"
)

// classify returns the backend sentinel an SDK error means, or nil when
// none fits (the caller's own cancellation, a malformed request...).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ate *attemptTimeoutError
	if errors.As(err, &ate) {
		return backend.ErrUnavailable
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return backend.ErrNoBucket
		case "NoSuchKey", "NotFound":
			return backend.ErrNotExist
		case "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch",
			"AllAccessDisabled", "InvalidToken", "ExpiredToken", "TokenRefreshRequired",
			"AccountProblem", "InvalidObjectState":
			return backend.ErrAccessDenied
		case "PreconditionFailed", "ConditionalRequestConflict":
			return backend.ErrPreconditionFailed
		case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout",
			"Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequests",
			"XMinioServerNotInitialized", "XMinioStorageFull":
			return backend.ErrUnavailable
		case "IncompleteBody", "BadDigest", "XAmzContentSHA256Mismatch", "InvalidPart":
			// 400s that a second attempt can pass: the body was cut or
			// damaged on the way (the checksums caught it), or a part of a
			// multipart upload went missing (a new attempt sends its parts
			// again). Left unclassified, so that a writer retries them;
			// every other 400 (XMinioInvalidObjectName, KeyTooLongError,
			// EntityTooLarge...) is ErrInvalidRequest below, and fails the
			// same way however often it is sent.
			return nil
		}
	}
	if status := httpStatus(err); status != 0 {
		return backend.FromHTTPStatus(status)
	}
	// No response: the caller's cancellation is its own; anything else
	// (refused, reset, DNS, TLS, timeouts) means the server is out of reach.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var send *smithyhttp.RequestSendError
	var ne net.Error
	if errors.As(err, &send) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return backend.ErrUnavailable
	}
	return nil
}

// httpStatus returns the status of the response behind err, or 0.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	var se *smithyhttp.ResponseError
	if errors.As(err, &se) {
		return se.HTTPStatusCode()
	}
	return 0
}

// errorCode returns the S3 error code behind err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// wrapErr formats "s3: op key: <sentinel>: <cause>", keeping both in the
// chain for errors.Is and errors.As.
func wrapErr(op, key string, sentinel, err error) error {
	if sentinel == nil {
		return fmt.Errorf("s3: %s %s: %w", op, key, err)
	}
	return fmt.Errorf("s3: %s %s: %w: %w", op, key, sentinel, err)
}

// mapErr wraps err with the sentinel classify finds.
func mapErr(op, key string, err error) error {
	return wrapErr(op, key, classify(err), err)
}

// mapErrAs is mapErr with some sentinels translated for one operation,
// e.g. a 412 on a pinned read is ErrVersionChanged.
func mapErrAs(op, key string, err error, from, to error) error {
	s := classify(err)
	if s == from {
		s = to
	}
	return wrapErr(op, key, s, err)
}

// attemptTimeoutError is one attempt running out of time. It is retryable
// and, once attempts are exhausted, ErrUnavailable. It deliberately does
// not unwrap to the context error it caused: the SDK would take that for
// the caller's cancellation and stop retrying.
type attemptTimeoutError struct {
	d   time.Duration
	err error
	// last: the operation's silentAfter-th attempt to time out, not
	// retried (stall.go).
	last bool
	// dropped: the connection was dropped by the other end after this
	// much silence, before d ran out (droppedInSilence).
	dropped time.Duration
}

func (e *attemptTimeoutError) Error() string {
	if e.dropped > 0 {
		return fmt.Sprintf("attempt answered nothing for %s, then the connection was dropped (%v)", e.dropped.Round(time.Millisecond), e.err)
	}
	return fmt.Sprintf("attempt timed out after %s (%v)", e.d, e.err)
}
func (e *attemptTimeoutError) RetryableError() bool { return !e.last }
func (e *attemptTimeoutError) Timeout() bool        { return true }

// attemptTimeout bounds each attempt of one operation: it sits right after
// the SDK's retry loop, so every retry gets a fresh deadline. For a GET
// (stream) it bounds the wait for the response headers only; the body's
// context then lives until the body is closed, and the stall guard in
// bodyReader watches it.
type attemptTimeout struct {
	d      time.Duration
	stream bool
}

func (attemptTimeout) ID() string { return "StrataAttemptTimeout" }

func (m attemptTimeout) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	actx, cancel := context.WithCancel(ctx)
	start := time.Now()
	timer := time.AfterFunc(m.d, cancel)
	out, md, err := next.HandleFinalize(actx, in)
	inTime := timer.Stop()
	if m.stream && err == nil {
		if o, ok := out.Result.(*s3.GetObjectOutput); ok && o.Body != nil {
			if inTime {
				o.Body = &cancelOnClose{ReadCloser: o.Body, cancel: cancel}
				return out, md, nil
			}
			o.Body.Close() // its context is gone: the attempt failed
			err = context.DeadlineExceeded
		}
	}
	cancel()
	switch {
	case err == nil || ctx.Err() != nil:
	case !inTime:
		err = timedOut(ctx, m.d, err)
	default:
		err = droppedInSilence(ctx, m.d, time.Since(start), err)
	}
	return out, md, err
}

// cancelOnClose releases a GET attempt's context with its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// withTimeout returns the per-operation option installing attemptTimeout.
// counted: the operation fails at its second timed-out attempt (stall.go);
// a GET's or a lookup's short attempts are not counted, their callers
// bound the whole operation (a lookup at 8 s) and keep sending attempts
// until then.
func withTimeout(d time.Duration, stream, counted bool) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if counted {
				if err := addTimeoutCount(s); err != nil {
					return err
				}
			}
			return s.Finalize.Insert(attemptTimeout{d: d, stream: stream}, "Retry", middleware.After)
		})
	}
}

// stopGate refuses to send another attempt of an upload's last request
// once the upload is stopped (PutOptions.Stop): an attempt already sent is
// answered, but no retry goes out after the stop. ErrStopped is not
// retryable. sent, if set, records that an attempt went out: a stop
// after it says nothing about whether that attempt landed.
type stopGate struct {
	stop <-chan struct{}
	sent *atomic.Bool
}

func (stopGate) ID() string { return "StrataStopGate" }

func (g stopGate) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	if backend.Stopped(g.stop) {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, backend.ErrStopped
	}
	if g.sent != nil {
		g.sent.Store(true)
	}
	return next.HandleFinalize(ctx, in)
}

// withStopGate puts a stopGate in every attempt of one operation; sent
// (may be nil) records that an attempt was sent.
func withStopGate(stop <-chan struct{}, sent *atomic.Bool) func(*s3.Options) {
	return func(o *s3.Options) {
		if stop == nil {
			return
		}
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Insert(stopGate{stop: stop, sent: sent}, "Retry", middleware.After)
		})
	}
}
