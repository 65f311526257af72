package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestLookupReadsASmallFile: a small file opened by path, with no readdir
// (a DataLoader's file list), is read by the request its lookup sends: no
// GET of its own at open, the bytes right. A file bigger than the head, and
// an empty one, read right too.
func TestLookupReadsASmallFile(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := map[string][]byte{
		"train/a/small.jpg": randData(1, 100<<10),
		"train/a/big.bin":   randData(2, 600<<10),
		"train/a/empty":     {},
	}
	put(t, srv.writer(t, bucket), files)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr)
	reads := func() float64 {
		return metric(scrape(t, addr), "strata_backend_requests_total", map[string]string{"op": "read"})
	}
	got, err := os.ReadFile(filepath.Join(m.dir, "train/a/small.jpg"))
	if err != nil || !bytes.Equal(got, files["train/a/small.jpg"]) {
		t.Fatalf("small file: %d bytes, %v", len(got), err)
	}
	if n := reads(); n != 0 {
		t.Errorf("opening a 100 KiB file by path sent %v GETs besides its lookup, want 0", n)
	}
	s, _ := readSessionNow(t, m)
	if s.Fetches != 1 || s.FetchedBytes != 100<<10 {
		t.Errorf("session counts %d fetches of %d bytes, want the lookup's 1 of 100 KiB", s.Fetches, s.FetchedBytes)
	}
	for _, k := range []string{"train/a/big.bin", "train/a/empty"} {
		got, err := os.ReadFile(filepath.Join(m.dir, k))
		if err != nil || !bytes.Equal(got, files[k]) {
			t.Fatalf("%s: %d bytes, %v", k, len(got), err)
		}
	}
	if n := reads(); n != 1 {
		t.Errorf("the 600 KiB file took %v GETs besides its lookup, want 1", n)
	}
}
