package main

import (
	"errors"
	"strings"
	"testing"
)

// TestPageReportingNotHeldIsAWarning: where free page reporting cannot be
// held off (the bench not run as root), the run goes on, as it does when
// the page cache cannot be dropped, and the report says so; -page-reporting
// keep does not touch it.
func TestPageReportingNotHeldIsAWarning(t *testing.T) {
	defer func(f func() (func() error, string, error)) { holdOffPageReporting = f }(holdOffPageReporting)
	calls := 0
	holdOffPageReporting = func() (func() error, string, error) {
		calls++
		return nil, "", errors.New("permission denied")
	}
	e := &Env{Cfg: Config{PageReporting: "off"}, log: func(string, ...any) {}}
	e.HoldOffPageReporting()
	if calls != 1 || len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "NOT held off") {
		t.Fatalf("calls %d, notes %q: want one attempt and a note that reporting was not held off", calls, e.Notes)
	}
	e = &Env{Cfg: Config{PageReporting: "keep"}, log: func(string, ...any) {}}
	e.HoldOffPageReporting()
	if calls != 1 || len(e.Notes) != 0 {
		t.Fatalf("-page-reporting keep: calls %d, notes %q", calls, e.Notes)
	}
}
