package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// An endpoint that goes silent (connections accepted, nothing answered,
// or a server stopped) must fail an upload in a bounded time, so that a
// close with --upload sync returns and the data waits in the cache for a
// retry. An attempt of an upload request is otherwise bound only by its
// chunk transfer timeout (the whole chunk at the slowest throughput
// accepted: a minute for a 16 MiB chunk) and retried for RetryDeadline,
// and an unanswered final request is then checked against the object,
// whose every attempt waits out its own timeout: 151 s for a small file.
// Two things bound it:
//
//   - uploadStall cuts an attempt of an upload request once nothing has
//     moved for StallTimeout: no byte of its body taken by the
//     connection, no answer, no byte of the answer (the server
//     assembling a large object at finalization answers late; that is
//     one cut attempt, then a re-send that the server answers). An
//     attempt the other end drops with no answer after at least half
//     the bound of silence (a peer's or a proxy's idle timeout, which
//     races the cut) is taken as cut too.
//   - an upload whose attempts go unanswered silentAfter times in a row
//     (cut by uploadStall, or by the response header timeout that the
//     request's end starts), with nothing acknowledged between them
//     (uploadRetry), is not retried further and is not checked against
//     the object (the endpoint is silent; the check could only wait
//     too): Put fails with
//     backend.ErrUnavailable, which the writeback manager retries on its
//     own schedule. Should the last request have landed after all, the
//     retry is conditional and its 412 is checked then (confirmUpload).

// silentAfter is how many consecutive attempts of an upload may go
// unanswered before it fails instead of retrying.
const silentAfter = 2

// stallError is an upload attempt cut by uploadStall. It is a network
// timeout, which the library retries (shouldRetry) until silentAfter.
type stallError struct {
	d       time.Duration
	dropped bool // the other end dropped the connection after d of silence
}

func (e *stallError) Error() string {
	if e.dropped {
		return fmt.Sprintf("gcs: upload request moved nothing for %v, then the connection was dropped (endpoint silent)", e.d.Round(time.Millisecond))
	}
	return fmt.Sprintf("gcs: upload request moved nothing for %v (endpoint silent)", e.d)
}
func (e *stallError) Timeout() bool   { return true }
func (e *stallError) Temporary() bool { return true }

// isStall reports an attempt cut by uploadStall.
func isStall(err error) bool {
	var se *stallError
	return errors.As(err, &se)
}

// unanswered reports an attempt that got no answer in its time: cut by
// uploadStall, by the response header timeout, or by the chunk transfer
// timeout.
func unanswered(err error) bool {
	var ne net.Error
	return isStall(err) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// uploadStall is the transport layer that cuts upload requests that stall
// (see above); other requests pass through.
type uploadStall struct {
	rt http.RoundTripper
	d  time.Duration
}

// isUpload reports a JSON API upload request: a resumable session's
// start, its chunks and its finalization, or a one-request upload.
func isUpload(req *http.Request) bool {
	return (req.Method == http.MethodPost || req.Method == http.MethodPut) && strings.HasPrefix(req.URL.Path, "/upload/")
}

func (t uploadStall) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.d <= 0 || !isUpload(req) {
		return t.rt.RoundTrip(req)
	}
	parent := req.Context()
	ctx, cancel := context.WithCancel(parent)
	s := &stallTimer{cancel: cancel, d: t.d}
	s.last.Store(time.Now().UnixNano())
	s.timer = time.AfterFunc(t.d, s.fire)
	req = req.WithContext(ctx) // a copy: RoundTrip must not change the caller's request
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &movingBody{ReadCloser: req.Body, moved: s.moved}
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		s.stop()
		if s.fired.Load() {
			return nil, &stallError{d: t.d}
		}
		if silence := s.silence(); silence >= t.d/2 && parent.Err() == nil {
			// Dropped by the other end after a long silence (a peer's or
			// a proxy's idle timeout) rather than cut by us: as unanswered,
			// and which comes first is a race.
			return nil, &stallError{d: silence, dropped: true}
		}
		return nil, err
	}
	s.moved()
	resp.Body = &movingBody{ReadCloser: resp.Body, moved: s.moved, closed: s.stop, stalled: s.stalledErr}
	return resp, nil
}

// stallTimer cancels one request once it has not moved for d.
type stallTimer struct {
	cancel context.CancelFunc
	d      time.Duration
	timer  *time.Timer
	fired  atomic.Bool
	once   sync.Once
	last   atomic.Int64 // when something last moved (UnixNano)
}

func (s *stallTimer) fire() { s.fired.Store(true); s.cancel() }

// silence is how long nothing has moved.
func (s *stallTimer) silence() time.Duration { return time.Since(time.Unix(0, s.last.Load())) }

func (s *stallTimer) moved() {
	s.last.Store(time.Now().UnixNano())
	if !s.fired.Load() {
		s.timer.Reset(s.d)
	}
}

func (s *stallTimer) stop() {
	s.once.Do(func() { s.timer.Stop(); s.cancel() })
}

// stalledErr is the error a body read returns once the timer cut it.
func (s *stallTimer) stalledErr(err error) error {
	if s.fired.Load() {
		return &stallError{d: s.d}
	}
	return err
}

// movingBody reports every read that moved bytes; a response body also
// ends its request's timer when closed.
type movingBody struct {
	io.ReadCloser
	moved   func()
	closed  func()
	stalled func(error) error
}

func (b *movingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.moved()
	}
	if err != nil && !errors.Is(err, io.EOF) && b.stalled != nil {
		err = b.stalled(err)
	}
	return n, err
}

func (b *movingBody) Close() error {
	err := b.ReadCloser.Close()
	if b.closed != nil {
		b.closed()
	}
	return err
}
