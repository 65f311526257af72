package mount

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/config"
)

// A refused GCS mount names Google's credentials, never AWS's, and an error
// a backend explained itself is not explained a second time.
func TestDescribeBackendErrNamesTheSourcesCredentials(t *testing.T) {
	denied := errors.New("gcs: check gs://b: " + backend.ErrAccessDenied.Error())
	denied = errors.Join(denied, backend.ErrAccessDenied)
	for _, tc := range []struct {
		scheme, want, never string
	}{
		{"gs", "GOOGLE_APPLICATION_CREDENTIALS", "AWS"},
		{"s3", "AWS_ACCESS_KEY_ID", "GOOGLE"},
	} {
		msg := describeBackendErr(config.Source{Scheme: tc.scheme, Bucket: "b"}, denied).Error()
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.never) {
			t.Errorf("%s: %q: want %q and no %q", tc.scheme, msg, tc.want, tc.never)
		}
	}
	explained := backend.Explain("s3: access denied to s3://b with credentials from X: check the keys", backend.ErrAccessDenied, nil)
	msg := describeBackendErr(config.Source{Scheme: "s3", Bucket: "b"}, explained).Error()
	if strings.Count(msg, "access denied") != 1 || !errors.Is(describeBackendErr(config.Source{Scheme: "s3", Bucket: "b"}, explained), backend.ErrAccessDenied) {
		t.Errorf("explained error described again or unwrapped: %q", msg)
	}
}
