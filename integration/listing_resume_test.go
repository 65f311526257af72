package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pageProxy stands in front of an S3 server and records the delimited
// listings of one prefix (not the one-key listings of lookups); while broken it answers each of them that asks
// for a later page with 500 InternalError, as S3 does in an outage.
type pageProxy struct {
	rp     *httputil.ReverseProxy
	prefix string
	broken atomic.Bool

	mu    sync.Mutex
	pages []string // the continuation token of each listing asked for
}

func newPageProxy(t *testing.T, upstream, prefix string) (*pageProxy, string) {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &pageProxy{rp: httputil.NewSingleHostReverseProxy(u), prefix: prefix}
	p.rp.ErrorLog = nil
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *pageProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && q.Get("list-type") == "2" && q.Get("prefix") == p.prefix && q.Get("delimiter") == "/" && q.Get("max-keys") != "1" {
		token := q.Get("continuation-token") + q.Get("start-after")
		p.mu.Lock()
		p.pages = append(p.pages, token)
		p.mu.Unlock()
		if token != "" && p.broken.Load() {
			s3Error(w, http.StatusInternalServerError, "InternalError")
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

func (p *pageProxy) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.pages...)
}

// TestListingResumesAfterAnOutage: a directory of 2,500 keys (three
// pages) whose listing fails on its second page fails the readdir; read
// again once the backend answers, it is listed from the page that failed,
// not from its first page, and holds every name (README: "Metadata").
func TestListingResumesAfterAnOutage(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := map[string][]byte{}
	for i := range 2500 {
		files[fmt.Sprintf("big/f%04d", i)] = []byte{byte(i)}
	}
	putParallel(t, srv.writer(t, bucket), files)
	proxy, addr := newPageProxy(t, srv.m.Endpoint, "big/")
	m := startMount(t, srv, srv.source(bucket, ""), "", endpointOf(addr)...)
	dir := filepath.Join(m.dir, "big")
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}

	proxy.broken.Store(true)
	if es, err := os.ReadDir(dir); err == nil {
		t.Fatalf("readdir with the second page failing: %d entries and no error", len(es))
	}
	first := len(proxy.asked())
	proxy.broken.Store(false)

	var (
		es  []os.DirEntry
		err error
	)
	deadline := time.Now().Add(20 * time.Second) // the metadata breaker probes once a second
	for es, err = os.ReadDir(dir); err != nil && time.Now().Before(deadline); es, err = os.ReadDir(dir) {
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("readdir once the backend answers again: %v", err)
	}
	if len(es) != len(files) {
		t.Fatalf("the resumed listing holds %d names, want %d", len(es), len(files))
	}
	pages := proxy.asked()
	t.Logf("pages asked for: %d while failing, %d after (tokens %q)", first, len(pages)-first, pages)
	for _, tok := range pages[1:] {
		if tok == "" {
			t.Fatalf("the first page was listed again: the listing restarted (tokens %q)", pages)
		}
	}
	if got := len(pages) - first; got != 2 {
		t.Errorf("%d pages listed after the outage, want 2 (the failed one and the last)", got)
	}
}
