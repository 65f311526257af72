package testserver

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }
func (r *recorder) Skipf(format string, a ...any)  { r.skip = fmt.Sprintf(format, a...) }

func TestSkipOrFail(t *testing.T) {
	for _, e2e := range []string{"1", ""} {
		t.Setenv("STRATA_E2E", e2e)
		r := &recorder{TB: t}
		SkipOrFail(r, "rclone %s", "missing")
		if e2e == "1" && (r.fatal == "" || r.skip != "") {
			t.Errorf("STRATA_E2E=1: fatal %q, skip %q; want a failure", r.fatal, r.skip)
		}
		if e2e == "" && (r.skip != "rclone missing" || r.fatal != "") {
			t.Errorf("STRATA_E2E unset: fatal %q, skip %q; want a skip", r.fatal, r.skip)
		}
	}
}
