package s3

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// An endpoint that goes silent (connections accepted, nothing answered,
// or a server stopped) must fail an upload in a bounded time, so that a
// close with --upload sync returns and the data waits in the cache for a
// retry: an attempt of a request carrying data is otherwise bound only by
// TransferTimeout (minutes, for a big part on a slow link), and retried up
// to MaxAttempts times. Two things bound it:
//
//   - sendStall cuts an attempt of a request carrying data (PutObject,
//     UploadPart, CompleteMultipartUpload) once nothing has moved for
//     SendStallTimeout: no byte of its body taken by the connection, no
//     answer, no byte of the answer's body (S3 keeps a long
//     CompleteMultipartUpload alive with whitespace). progressTransport
//     reports each movement.
//   - a metadata or data request (RequestTimeout, TransferTimeout) whose
//     attempts time out silentAfter times (this bound or an
//     attemptTimeout) is not retried further: the endpoint is taken for
//     silent, and the operation fails with ErrUnavailable, which the
//     caller (the writeback manager, a listing) retries on its own
//     schedule. A GET's or a lookup's short attempts (ResponseTimeout) are
//     not counted: their callers bound the whole operation.
//   - an attempt the other end drops with no answer after at least half
//     its bound of silence counts as timed out (droppedInSilence): a
//     server's idle timeout (MinIO's is 30 s) races our own cut.

// silentAfter is how many of an operation's attempts may time out before
// it fails instead of retrying.
const silentAfter = 2

// progressKey marks an attempt's context with the progress it reports.
type progressKey struct{}

// progress is how an attempt's movements reach its sendStall.
type progress struct{ touch func() }

// sendStall is the per-attempt stall bound; see above.
type sendStall struct{ d time.Duration }

func (sendStall) ID() string { return "StrataSendStall" }

func (m sendStall) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fired atomic.Bool
	var moved atomic.Int64 // when something last moved (UnixNano)
	moved.Store(time.Now().UnixNano())
	timer := time.AfterFunc(m.d, func() { fired.Store(true); cancel() })
	p := &progress{touch: func() {
		moved.Store(time.Now().UnixNano())
		if !fired.Load() {
			timer.Reset(m.d)
		}
	}}
	out, md, err := next.HandleFinalize(context.WithValue(actx, progressKey{}, p), in)
	timer.Stop()
	switch {
	case err == nil || ctx.Err() != nil:
	case fired.Load():
		err = timedOut(ctx, m.d, err)
	default:
		err = droppedInSilence(ctx, m.d, time.Since(time.Unix(0, moved.Load())), err)
	}
	return out, md, err
}

// droppedInSilence counts, as an attempt timed out, one that ended with
// no answer at all after at least half its bound d of silence: the
// connection was dropped by the other end (MinIO drops one that sent it
// nothing after 30 s; proxies and load balancers have idle timeouts)
// rather than cut by us. The endpoint was as silent, and whether the cut
// or the drop comes first is a race; counted or not, two such attempts
// would fail the operation at about the same time or after every
// MaxAttempts. Any other error is returned as it is.
func droppedInSilence(ctx context.Context, d, silence time.Duration, err error) error {
	var ate *attemptTimeoutError
	if silence < d/2 || httpStatus(err) != 0 || errors.As(err, &ate) {
		return err
	}
	e := timedOut(ctx, d, err).(*attemptTimeoutError)
	e.dropped = silence
	return e
}

// withSendStall returns the per-operation option installing sendStall.
func withSendStall(d time.Duration) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if err := addTimeoutCount(s); err != nil {
				return err
			}
			return s.Finalize.Insert(sendStall{d: d}, "Retry", middleware.After)
		})
	}
}

// timeoutCountKey holds an operation's count of attempts that timed out.
type timeoutCountKey struct{}

// timeoutCount gives each operation its count, before the retry loop.
type timeoutCount struct{}

func (timeoutCount) ID() string { return "StrataTimeoutCount" }

func (timeoutCount) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	return next.HandleInitialize(context.WithValue(ctx, timeoutCountKey{}, new(atomic.Int32)), in)
}

// addTimeoutCount installs timeoutCount once per stack.
func addTimeoutCount(s *middleware.Stack) error {
	if _, ok := s.Initialize.Get(timeoutCount{}.ID()); ok {
		return nil
	}
	return s.Initialize.Add(timeoutCount{}, middleware.Before)
}

// timedOut is the error of an attempt that ran out of time after d: to be
// retried, unless it is the operation's silentAfter-th.
func timedOut(ctx context.Context, d time.Duration, err error) error {
	last := false
	if n, ok := ctx.Value(timeoutCountKey{}).(*atomic.Int32); ok {
		last = n.Add(1) >= silentAfter
	}
	return &attemptTimeoutError{d: d, err: err, last: last}
}

// silent reports an operation given up because its endpoint answered
// nothing: its silentAfter-th attempt timed out. Asking the endpoint
// anything more would only wait too.
func silent(err error) bool {
	var ate *attemptTimeoutError
	return errors.As(err, &ate) && ate.last
}

// progressTransport reports, to the attempt that sent a request (its
// context carries a progress), every byte of the request's body the
// connection takes, the answer's arrival and every byte of its body.
type progressTransport struct{ http.RoundTripper }

func (t progressTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p, ok := req.Context().Value(progressKey{}).(*progress)
	if !ok {
		return t.RoundTripper.RoundTrip(req)
	}
	if req.Body != nil && req.Body != http.NoBody {
		req = req.WithContext(req.Context()) // a copy: RoundTrip must not change the caller's request
		req.Body = &touchReader{ReadCloser: req.Body, touch: p.touch}
	}
	resp, err := t.RoundTripper.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	p.touch()
	resp.Body = &touchReader{ReadCloser: resp.Body, touch: p.touch}
	return resp, nil
}

// touchReader reports every read that moved bytes.
type touchReader struct {
	io.ReadCloser
	touch func()
}

func (r *touchReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	if n > 0 {
		r.touch()
	}
	return n, err
}
