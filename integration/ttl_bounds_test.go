package integration

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
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

// TestDeletedObjectGoneWithinTheTTL: an object deleted in the bucket while
// a reader lists its directory and reads it in a loop is ENOENT within the
// TTL (2 s here; 1 s of margin for the loop and the kernel). Before the
// fix every readdirplus handed the kernel the entry again with a full TTL
// from a listing about to expire: it stayed readable for up to twice the
// TTL.
func TestDeletedObjectGoneWithinTheTTL(t *testing.T) {
	requireFUSE(t)
	const ttl = 2 * time.Second
	const bound = ttl + time.Second
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	put(t, w, map[string][]byte{"del6/f": []byte("old"), "del6/g": []byte("other")})
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metadata-ttl", ttl.String())
	dir, f := filepath.Join(m.dir, "del6"), filepath.Join(m.dir, "del6", "f")
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "old" {
		t.Fatalf("del6/f: %q %v", b, err)
	}

	// Deleted right after the listing was fetched: the listing stays
	// fresh for almost all of the TTL, and the loop lists it again just
	// before it expires (the worst case).
	if err := w.(backend.Deleter).Delete(context.Background(), "del6/f"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var lastSeen time.Duration
	for {
		_, _ = os.ReadDir(dir) // as the reader does; its result is not the point
		_, err := os.ReadFile(f)
		since := time.Since(deleted)
		if errors.Is(err, fs.ErrNotExist) {
			t.Logf("ENOENT %v after the delete (last read %v after it; TTL %v)", since.Round(time.Millisecond), lastSeen.Round(time.Millisecond), ttl)
			if since > bound {
				t.Errorf("deleted object readable until %v after the delete, ENOENT at %v; want ENOENT within %v (TTL %v)", lastSeen.Round(time.Millisecond), since.Round(time.Millisecond), bound, ttl)
			}
			return
		}
		if err != nil {
			t.Fatalf("del6/f %v after the delete: %v, want its old bytes or ENOENT", since, err)
		}
		lastSeen = since
		if since > 4*ttl {
			t.Fatalf("del6/f still readable %v after the delete (TTL %v)", since.Round(time.Millisecond), ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
