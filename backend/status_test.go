package backend_test

import (
	"testing"

	"github.com/stratafs/strata/backend"
)

func TestFromHTTPStatus(t *testing.T) {
	for _, tc := range []struct {
		code int
		want error
	}{
		{200, nil},
		{304, nil},
		{400, backend.ErrInvalidRequest},
		{401, backend.ErrAccessDenied},
		{403, backend.ErrAccessDenied},
		{404, backend.ErrNotExist},
		{405, backend.ErrInvalidRequest},
		{408, backend.ErrUnavailable},
		{409, nil}, // a conflicting operation in progress: S3 asks for a retry
		{411, backend.ErrInvalidRequest},
		{413, backend.ErrInvalidRequest},
		{414, backend.ErrInvalidRequest},
		{410, nil},
		{412, backend.ErrPreconditionFailed},
		{416, nil},
		{431, backend.ErrInvalidRequest},
		{429, backend.ErrUnavailable},
		{499, nil},
		{500, backend.ErrUnavailable},
		{502, backend.ErrUnavailable},
		{503, backend.ErrUnavailable},
		{504, backend.ErrUnavailable},
		{599, backend.ErrUnavailable},
	} {
		if got := backend.FromHTTPStatus(tc.code); got != tc.want {
			t.Errorf("FromHTTPStatus(%d) = %v, want %v", tc.code, got, tc.want)
		}
	}
}
