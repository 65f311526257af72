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
		{400, nil},
		{401, backend.ErrAccessDenied},
		{403, backend.ErrAccessDenied},
		{404, backend.ErrNotExist},
		{405, nil},
		{408, backend.ErrUnavailable},
		{409, nil},
		{410, nil},
		{412, backend.ErrPreconditionFailed},
		{416, nil},
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
