package main

import (
	"slices"
	"testing"
)

// A PATH is relative to the mountpoint, or absolute under it; nothing
// outside the mount is sent to it.
func TestRefreshPaths(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		bad  bool
	}{
		{args: nil, want: []string{""}},
		{args: []string{"train/x.bin", "/mnt/data/val/", "/mnt/data", "."}, want: []string{"train/x.bin", "val", "", ""}},
		{args: []string{"a/../b"}, want: []string{"b"}},
		{args: []string{"/mnt/other/x"}, bad: true},
		{args: []string{"/mnt/database/x"}, bad: true}, // a sibling sharing the name's prefix
		{args: []string{"../x"}, bad: true},
	} {
		got, err := refreshPaths("/mnt/data", tc.args)
		if (err != nil) != tc.bad || !tc.bad && !slices.Equal(got, tc.want) {
			t.Errorf("refreshPaths(%q) = %q, %v; want %q (error %v)", tc.args, got, err, tc.want, tc.bad)
		}
	}
}
