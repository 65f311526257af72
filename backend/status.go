package backend

import "net/http"

// FromHTTPStatus returns the sentinel an HTTP status of a failed request
// means, or nil when none fits. It is the status-only fallback of the S3
// and GCS backends, used when the service's own error code did not
// decide: 404 is ErrNotExist, 401 and 403 ErrAccessDenied, 412
// ErrPreconditionFailed, 408, 429 and every 5xx ErrUnavailable (worth
// retrying, and down once retries are exhausted), and 400, 405, 411, 413,
// 414 and 431 ErrInvalidRequest (the request itself is refused: the same
// one would be refused again). Other 4xx stay unclassified, so writers
// retry them: 409 is S3's OperationAborted ("a conflicting operation is
// in progress; try again"), 416 a range a caller checks for itself.
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
	case code == http.StatusBadRequest || code == http.StatusMethodNotAllowed || code == http.StatusLengthRequired ||
		code == http.StatusRequestEntityTooLarge || code == http.StatusRequestURITooLong ||
		code == http.StatusRequestHeaderFieldsTooLarge:
		return ErrInvalidRequest
	}
	return nil
}
