package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/stratafs/strata/backend"
)

// errStalled is the cause of a ReadRange body that made no progress for
// StallTimeout.
var errStalled = errors.New("no data received within the stall timeout")

// errOpTimeout is the cause of a metadata operation that outlived its
// bound (RetryDeadline+RequestTimeout) while the caller's context was live.
var errOpTimeout = errors.New("operation timed out")

// wrap maps a library error to the backend sentinels and wraps it as
// "gcs: op key: sentinel: detail". Both the sentinel and the original
// error stay reachable through errors.Is/As. ctx is the caller's context:
// when it is done, its error is reported as is (the caller gave up; the
// backend is not at fault).
func wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("gcs: %s %s: %w", op, key, err)
	}
	if s := classify(err); s != nil && !errors.Is(err, s) {
		return fmt.Errorf("gcs: %s %s: %w: %w", op, key, s, err)
	}
	return fmt.Errorf("gcs: %s %s: %w", op, key, err)
}

// sentinels are the backend errors classify can return; one already in
// err's chain (put there by a caller that knew better) wins.
var sentinels = []error{
	backend.ErrNoBucket, backend.ErrVersionChanged, backend.ErrNotExist, backend.ErrAccessDenied,
	backend.ErrPreconditionFailed, backend.ErrUnavailable, backend.ErrInvalidRequest,
}

// classify returns the sentinel for err, or nil when none fits (a 400
// for an invalid name, say).
func classify(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return backend.ErrNoBucket
	case errors.Is(err, storage.ErrObjectNotExist):
		return backend.ErrNotExist
	case errors.Is(err, errStalled), errors.Is(err, errOpTimeout):
		return backend.ErrUnavailable
	}
	if code := httpCode(err); code != 0 {
		if code == http.StatusBadRequest && checksumMismatch(err) {
			return nil // damaged on the way: a writer sends it again
		}
		return backend.FromHTTPStatus(code)
	}
	if code := authCode(err); code != 0 {
		if code >= 500 {
			return backend.ErrUnavailable
		}
		return backend.ErrAccessDenied // the token endpoint refused the credentials
	}
	if isNetwork(err) {
		return backend.ErrUnavailable
	}
	return nil
}

// httpCode is the status of a GCS API error, 0 if err is not one.
func httpCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// checksumMismatch reports a 400 for an upload whose CRC32C (or MD5) did
// not match what GCS received: the bytes were damaged in transit, which a
// second attempt can get past, unlike the other 400s (an invalid object
// name, say) that fail the same way each time.
func checksumMismatch(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false
	}
	msg := ge.Message
	for _, it := range ge.Errors {
		msg += " " + it.Message
	}
	return strings.Contains(msg, "doesn't match calculated") || strings.Contains(msg, "does not match calculated")
}

// authCode is the status of a failed token exchange, 0 if err is not one.
func authCode(err error) int {
	var ae *auth.Error
	if errors.As(err, &ae) {
		if ae.Response != nil {
			return ae.Response.StatusCode
		}
		return http.StatusUnauthorized
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.Response != nil {
			return re.Response.StatusCode
		}
		return http.StatusUnauthorized
	}
	return 0
}

// isNetwork reports transport failures: refused or reset connections,
// timeouts, bodies cut short.
func isNetwork(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded)
}

// shouldRetry is the library's retry predicate (408, 429, 5xx, reset and
// refused connections, unexpected EOF, temporary errors) plus every
// network timeout (dial, TLS handshake, response headers) whether or not
// it calls itself temporary. A cancelled or expired context is not
// retried: the library checks the operation's context before retrying.
func shouldRetry(err error) bool {
	if storage.ShouldRetry(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
