package integration

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestListingWithTheEndpointSilent: the endpoint accepts connections and
// never answers (toxiproxy's timeout toxic) under a live mount, and the
// first request to meet it is a listing: an ls of a directory past its
// TTL (the mount's root: no lookup goes first). A listing page gets 30 s an attempt (a big directory's page can be
// slow to come), so the ls waited out every attempt, 2.5 minutes, before
// it was served stale. Now a listing that has no answer soon asks the
// endpoint a one-key question beside it, and if that goes unanswered too
// the backend is down: the ls is served stale within README's 10 s, and a
// directory never listed fails with EIO as fast.
func TestListingWithTheEndpointSilent(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	tp := startToxiproxy(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"seen/a.txt": []byte("a"), "seen/b.txt": []byte("b")})
	addr := tp.proxy(t, "list-silent", srv.m.Addr)
	const ttl = 2 * time.Second
	m := startMount(t, srv, srv.source(bucket, ""), "", append(endpointOf(addr), "--metadata-ttl", ttl.String())...)
	// The mount's root: an ls of it needs no lookup first (a lookup of
	// a name past its TTL is bounded on its own, and opens the breaker).
	before, err := os.ReadDir(m.dir)
	if err != nil || len(before) != 1 {
		t.Fatalf("ls of the root: %v %v", before, err)
	}
	tp.toxic(t, "list-silent", "hole-up", "timeout", "upstream", 1, map[string]int64{"timeout": 0})
	tp.toxic(t, "list-silent", "hole-down", "timeout", "downstream", 1, map[string]int64{"timeout": 0})
	time.Sleep(ttl + 500*time.Millisecond) // the listing is past its TTL
	start := time.Now()
	got, err := os.ReadDir(m.dir)
	took := time.Since(start)
	if err != nil || len(got) != 1 || took > eioBound {
		t.Fatalf("ls past the TTL with the endpoint silent: %d entries, %v after %v (want the cached entry within %v)", len(got), err, took.Round(time.Millisecond), eioBound)
	}
	t.Logf("ls past the TTL: served stale after %v", took.Round(time.Millisecond))
	start = time.Now()
	_, err = os.ReadDir(filepath.Join(m.dir, "seen", "never"))
	took = time.Since(start)
	if err == nil || (!errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrNotExist)) || took > eioBound {
		t.Errorf("ls of a directory never listed with the endpoint silent: %v after %v (want an error within %v)", err, took.Round(time.Millisecond), eioBound)
	}
}
