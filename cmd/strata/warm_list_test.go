package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A --from-list line is the path as written: a key with a leading or
// trailing space (valid in S3 and on the mount) is warmed as that key.
func TestReadListKeepsSpaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(p, []byte("sp/trail \n lead\n\n   \n# comment\ncrlf\r\nplain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readList(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sp/trail ", " lead", "crlf", "plain"}; !slices.Equal(got, want) {
		t.Fatalf("readList = %q, want %q", got, want)
	}
}
