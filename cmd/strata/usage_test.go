package main

import (
	"strings"
	"testing"
)

// TestWrongArgumentCountShowsUsage: `strata mount s3://x` said only
// "accepts 2 arg(s), received 1", naming neither SOURCE nor MOUNTPOINT.
// A wrong number of arguments must show the command's usage line.
func TestWrongArgumentCountShowsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", "s3://bucket"}, "usage: strata mount [flags] SOURCE MOUNTPOINT"},
		{[]string{"sync"}, "usage: strata sync MOUNTPOINT"},
		{[]string{"warm", "s3://a", "s3://b"}, "usage: strata warm [flags] SOURCE"},
		{[]string{"version", "x"}, "usage: strata version"},
	} {
		root := newRoot()
		root.SetArgs(tc.args)
		root.SetOut(new(strings.Builder))
		root.SetErr(new(strings.Builder))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("strata %s: %v; want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
