package gcs

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratafs/strata/internal/testserver"
)

// faultProxy sits between a Backend and fake-gcs-server and lets a test
// break chosen requests: error statuses, stalled or truncated bodies.
// Requests the current fault declines go through untouched.
type faultProxy struct {
	URL      string
	upstream *url.URL
	host     string // fake-gcs-server's host, sent as Host (its -public-host)
	rp       *httputil.ReverseProxy

	mu    sync.Mutex
	fault func(w http.ResponseWriter, r *http.Request) bool // true: handled
	hits  atomic.Int64                                      // requests the fault handled
	seen  atomic.Int64                                      // all requests
}

func newFaultProxy(t *testing.T, f *testserver.FakeGCS) *faultProxy {
	t.Helper()
	up, err := url.Parse(f.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{upstream: up, host: f.Addr}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.Out.Host = f.Addr
		},
		// Resumable upload sessions continue through the proxy too.
		ModifyResponse: func(resp *http.Response) error {
			if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, f.Endpoint) {
				resp.Header.Set("Location", p.URL+strings.TrimPrefix(loc, f.Endpoint))
			}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.seen.Add(1)
	p.mu.Lock()
	fault := p.fault
	p.mu.Unlock()
	if fault != nil {
		defer func() {
			if v := recover(); v != nil { // an aborted response counts too
				p.hits.Add(1)
				panic(v)
			}
		}()
		if fault(w, r) {
			p.hits.Add(1)
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// set installs fault (nil: pass everything) and resets the counters.
func (p *faultProxy) set(fault func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	p.fault = fault
	p.mu.Unlock()
	p.hits.Store(0)
	p.seen.Store(0)
}

// isMediaRead matches an object download, the request ReadRange makes:
// through the JSON API (alt=media, what a custom endpoint gets) or the
// XML API ("/bucket/key"); other JSON API, upload and batch paths are not.
func isMediaRead(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if r.URL.Query().Get("alt") == "media" {
		return true
	}
	for _, api := range []string{"/storage/", "/upload/", "/download/", "/batch/", "/_internal/"} {
		if strings.HasPrefix(r.URL.Path, api) {
			return false
		}
	}
	return true
}

// fetch performs r against fake-gcs-server and returns its response for
// a fault to mangle.
func (p *faultProxy) fetch(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme = p.upstream.Scheme
	out.URL.Host = p.upstream.Host
	out.Host = p.host
	return http.DefaultTransport.RoundTrip(out)
}

// statusFault answers the first n requests matching match with code.
func statusFault(code, n int, match func(*http.Request) bool) func(http.ResponseWriter, *http.Request) bool {
	var left atomic.Int64
	left.Store(int64(n))
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !match(r) || left.Add(-1) < 0 {
			return false
		}
		// Read the request first. Answering an upload chunk before its
		// body is in makes google.golang.org/api's resumable upload load
		// the next chunk into the buffer net/http is still sending for the
		// answered request: a race inside that library (harmless, those
		// bytes go nowhere) that -race would pin on this test.
		_, _ = io.Copy(io.Discard, r.Body) // a client gone mid-body needs no answer
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":"injected %s"}}`, code, http.StatusText(code))
		return true
	}
}

// bodyFault forwards matching reads but cuts their bodies after keep
// bytes, for the first n of them: stall (hold the connection open, no more
// bytes, until the client gives up) or truncate (abort the connection).
// then, if not nil, runs after the kept bytes are sent, before the cut.
func (p *faultProxy) bodyFault(n int, keep int64, stall bool, then func()) func(http.ResponseWriter, *http.Request) bool {
	var left atomic.Int64
	left.Store(int64(n))
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !isMediaRead(r) || left.Add(-1) < 0 {
			return false
		}
		resp, err := p.fetch(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return true
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.CopyN(w, resp.Body, keep) // a short copy is the fault being injected
		w.(http.Flusher).Flush()
		if then != nil {
			then()
		}
		if stall {
			<-r.Context().Done()
			return true
		}
		panic(http.ErrAbortHandler) // close the connection mid-body
	}
}
