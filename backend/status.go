package backend

import "net/http"

// FromHTTPStatus returns the sentinel an HTTP status of a failed request
// means, or nil when none fits (a 400 for an invalid argument, say). It is
// the status-only fallback of the S3 and GCS backends, used when the
// service's own error code did not decide: 404 is ErrNotExist, 401 and 403
// ErrAccessDenied, 412 ErrPreconditionFailed, and 408, 429 and every 5xx
// ErrUnavailable (worth retrying, and down once retries are exhausted).
func FromHTTPStatus(code int) error {
	switch {
	case code == http.StatusNotFound:
		return ErrNotExist
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return ErrAccessDenied
	case code == http.StatusPreconditionFailed:
		return ErrPreconditionFailed
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return ErrUnavailable
	}
	return nil
}
