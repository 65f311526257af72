package main

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUploadsRequestsOnlyToAStrataMount: `strata uploads --retry` and
// `--discard` are requests written as extended attributes of the
// mountpoint. Given a directory that is not a Strata mount, they used to
// set user.strata.retry on it and exit 0, as if retried; they now refuse
// and leave the directory alone.
func TestUploadsRequestsOnlyToAStrataMount(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"uploads", "--retry", dir},
		{"uploads", "--retry", dir, "x"},
		{"uploads", "--discard", dir, "x"},
	} {
		root := newRoot()
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "not mounted") {
			t.Errorf("strata %v: err = %v, want a refusal saying it is not mounted", args, err)
		}
	}
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(dir, buf)
	if err != nil {
		t.Fatal(err)
	}
	if names := string(buf[:n]); strings.Contains(names, "strata") {
		t.Fatalf("the directory got attributes: %q", names)
	}
}
