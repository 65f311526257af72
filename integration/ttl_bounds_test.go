package integration

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The README's bounds on what a mount with a finite --metadata-ttl shows:
// "Staleness is bounded by --metadata-ttl", and with the bucket
// unreachable "names already known answer from the cache (stale, logged
// once) and any other lookup or listing fails with EIO".

// TestKnownNamesWithTheBucketGone: names the mount learnt by looking them
// up after their directory's last listing (a new directory, a file put in
// a listed directory) keep answering from the cache once MinIO is gone;
// a directory looked up but never listed fails to list with EIO. Before
// the fix the older listing of the parent won: both were ENOENT.
func TestKnownNamesWithTheBucketGone(t *testing.T) {
	requireFUSE(t)
	const ttl = 2 * time.Second
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	put(t, w, map[string][]byte{"top.txt": []byte("top"), "d/x.txt": []byte("x")})
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metadata-ttl", ttl.String())
	path := func(p string) string { return filepath.Join(m.dir, p) }
	for _, d := range []string{"", "d"} {
		if _, err := os.ReadDir(path(d)); err != nil {
			t.Fatal(err)
		}
	}
	later := map[string][]byte{"newdir2/c": []byte("c"), "d/new.txt": []byte("new")}
	put(t, w, later)
	time.Sleep(ttl + time.Second) // the listings expire: lookups ask the bucket
	for k, v := range later {
		if b, err := os.ReadFile(path(k)); err != nil || string(b) != string(v) {
			t.Fatalf("%s with the bucket up: %q %v", k, b, err)
		}
	}

	srv.stop(t)
	time.Sleep(ttl + time.Second) // everything the mount knows is stale
	for k, v := range later {
		start := time.Now()
		b, err := os.ReadFile(path(k))
		if err != nil || string(b) != string(v) {
			t.Errorf("%s (looked up, read) with the bucket gone: %q %v after %v, want its cached bytes", k, b, err, time.Since(start).Round(time.Millisecond))
		}
	}
	if _, err := os.Stat(path("newdir2")); err != nil {
		t.Errorf("stat newdir2 with the bucket gone: %v, want the directory", err)
	}
	if es, err := os.ReadDir(path("newdir2")); !errors.Is(err, syscall.EIO) {
		t.Errorf("ls newdir2 (looked up, never listed) with the bucket gone: %d entries, %v; want EIO", len(es), err)
	}
	if es, err := os.ReadDir(path("d")); err != nil || len(es) == 0 {
		t.Errorf("ls d (listed) with the bucket gone: %d entries, %v; want its stale listing", len(es), err)
	}
}
