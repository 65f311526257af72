package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/shared"
	"github.com/stratafs/strata/internal/testserver"
)

// countingProxy sits in front of an S3 server and counts object GETs
// (ListObjectsV2 and bucket requests are not object reads) and the bytes
// they return: the origin's own view of what a mount read from it.
type countingProxy struct {
	srv   *httptest.Server
	gets  atomic.Int64
	bytes atomic.Int64
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u) // keeps the Host header the client signed
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.Trim(r.URL.Path, "/")
		if r.Method == http.MethodGet && strings.Contains(path, "/") && r.URL.Query().Get("list-type") == "" {
			p.gets.Add(1)
			w = &countingWriter{ResponseWriter: w, n: &p.bytes}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *countingProxy) reset() { p.gets.Store(0); p.bytes.Store(0) }

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// proxiedMinIO is the origin MinIO as mounts see it: through the proxy.
type proxiedMinIO struct {
	*minioServer
	proxy *countingProxy
}

func (s *proxiedMinIO) flags() []string {
	return []string{"--endpoint-url", s.proxy.srv.URL, "--force-path-style", "--region", s.m.Region}
}

// sharedReport is the part of <cache-dir>/shared.json the test reads.
type sharedReport struct {
	Running bool            `json:"running"`
	Stats   shared.Snapshot `json:"stats"`
}

func readShared(t *testing.T, cacheDir string) shared.Snapshot {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cacheDir, "shared.json"))
	if err != nil {
		t.Fatalf("shared.json: %v", err)
	}
	var r sharedReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("shared.json: %v", err)
	}
	if r.Running {
		t.Fatal("shared.json read before the mount exited")
	}
	return r.Stats
}

// TestSharedCacheSecondNode: node A reads a dataset from the origin and
// fills the shared tier; node B, with its own empty local cache, reads it
// all without one byte from the origin (by B's counters and by the
// origin's own request count); corrupt and truncated entries are refetched
// (and rewritten); with the tier down, reads go to the origin without
// error.
func TestSharedCacheSecondNode(t *testing.T) {
	requireFUSE(t)
	om := &minioServer{testserver.StartMinIO(t)}
	origin := &proxiedMinIO{minioServer: om, proxy: newCountingProxy(t, om.m.Endpoint)}
	tier := testserver.StartMinIO(t)
	bucket, tierBucket := origin.newBucket(t), tier.NewBucket(t)
	files := dataset("data/", 20<<20)
	put(t, origin.writer(t, bucket), files)
	want := expect(files, "data/")
	var total int64
	for k, v := range files {
		if strings.HasPrefix(k, "data/") {
			total += int64(len(v))
		}
	}
	source := origin.source(bucket, "data")
	sharedFlags := []string{"--shared-cache", "s3://" + tierBucket + "/nodes", "--shared-cache-endpoint-url", tier.Endpoint,
		"--shared-cache-force-path-style", "--shared-cache-region", tier.Region,
		// Slack for -race on a busy machine; a drop would make node B miss.
		"--shared-cache-timeout", "5s", "--shared-cache-write-buffer", "512MiB"}
	epoch := func(name string, extra ...string) (shared.Snapshot, int64, int64) {
		t.Helper()
		origin.proxy.reset()
		cacheDir := t.TempDir()
		m := startMount(t, origin, source, cacheDir, append(append([]string{}, sharedFlags...), extra...)...)
		if d := diffTrees(want, tree(t, m.dir)); d != "" {
			t.Fatalf("node %s: tree differs from the bucket:\n%s", name, d)
		}
		m.unmount()
		return readShared(t, cacheDir), origin.proxy.gets.Load(), origin.proxy.bytes.Load()
	}

	a, aGets, aBytes := epoch("A")
	if a.Origin.Bytes != total || aBytes < total || aGets == 0 || a.HitBlocks != 0 {
		t.Fatalf("node A: origin bytes %d (proxy: %d GETs, %d bytes), dataset %d; %+v", a.Origin.Bytes, aGets, aBytes, total, a)
	}
	if a.Writes == 0 || a.WritesDropped != 0 || a.WriteErrors != 0 {
		t.Fatalf("node A did not fill the tier completely: %+v", a)
	}

	b, bGets, bBytes := epoch("B")
	if b.Origin.Bytes != 0 || b.Origin.Requests != 0 || b.MissBlocks != 0 || bGets != 0 || bBytes != 0 {
		t.Fatalf("node B read from the origin: %d bytes, %d requests by its counters; %d GETs, %d bytes by the origin's", b.Origin.Bytes,
			b.Origin.Requests, bGets, bBytes)
	}
	if b.HitBytes != total || b.BadEntries != 0 {
		t.Fatalf("node B: hit bytes %d, dataset %d; %+v", b.HitBytes, total, b)
	}

	// Spoil two entries: a flipped bit in one, another cut short.
	ctx := context.Background()
	st := &minioServer{tier}
	tw := st.writer(t, tierBucket).(backend.Backend)
	page, err := tw.List(ctx, "nodes/"+shared.Namespace, backend.ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var entries []backend.ObjectInfo
	for _, o := range page.Objects {
		if _, _, _, ok := shared.ParseObject(o.Key); ok && o.Size > shared.HeaderSize+1000 {
			entries = append(entries, o)
		}
	}
	if len(entries) < 2 {
		t.Fatalf("tier holds %d entries", len(entries))
	}
	spoil := func(o backend.ObjectInfo, edit func([]byte) []byte) {
		rc, err := tw.ReadRange(ctx, o.Key, "", 0, o.Size)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		body = edit(body)
		put(t, st.writer(t, tierBucket), map[string][]byte{o.Key: body})
	}
	spoil(entries[0], func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })
	spoil(entries[len(entries)-1], func(b []byte) []byte { return b[:len(b)-100] })

	c, cGets, _ := epoch("C")
	if c.BadEntries != 2 || c.MissBlocks != 2 || cGets != 2 || c.Shared.Errors != 0 || c.BreakerTrips != 0 {
		t.Fatalf("node C past two bad entries: %d origin GETs; %+v", cGets, c)
	}
	// C rewrote both: D reads everything from the tier again.
	if d, dGets, _ := epoch("D"); d.BadEntries != 0 || d.Origin.Bytes != 0 || dGets != 0 {
		t.Fatalf("node D after repair: %d origin GETs; %+v", dGets, d)
	}

	// A tier that refuses (here: no such bucket) fails the mount, saying why.
	bad := append([]string{}, sharedFlags...)
	bad[1] = "s3://no-such-shared-bucket"
	if _, out, err := tryMount(t, origin, source, "", bad...); err == nil || !strings.Contains(out, "bucket does not exist") {
		t.Fatalf("mount with a missing shared bucket: %v\n%s", err, out)
	}

	// The tier goes down while E is mounted: every read still succeeds.
	origin.proxy.reset()
	cacheDir := t.TempDir()
	e := startMount(t, origin, source, cacheDir, sharedFlags...)
	if err := tier.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if d := diffTrees(want, tree(t, e.dir)); d != "" {
		t.Fatalf("node E (tier went down): tree differs:\n%s", d)
	}
	e.unmount()
	es := readShared(t, cacheDir)
	if es.Origin.Bytes != total || es.HitBlocks != 0 || es.BreakerTrips == 0 {
		t.Fatalf("node E: %+v", es)
	}
	t.Logf("node E read the dataset with the tier down in %s", time.Since(start).Round(time.Millisecond))

	// Mounting while the tier is down warns and serves from the origin.
	f, _, _ := epoch("F")
	if f.Origin.Bytes != total || f.HitBlocks != 0 || !f.BreakerOpen || f.Shared.Requests != 0 {
		t.Fatalf("node F (tier down at mount): %+v", f)
	}
}
