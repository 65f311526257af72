package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/testserver"
)

// cutCompleteProxy sits in front of MinIO and loses the answers of
// CompleteMultipartUpload (POST ?uploadId=): it forwards the request,
// lets MinIO complete the upload, then cuts the connection instead of
// answering. The first cut requests are cut; the rest pass.
type cutCompleteProxy struct {
	URL       string
	cut       atomic.Int64 // answers still to lose
	completes atomic.Int64 // complete requests seen
	statuses  chan int     // MinIO's answers to the cut requests
}

// completeProxy starts a proxy in front of MinIO at endpoint that
// forwards every request but CompleteMultipartUpload (POST ?uploadId=),
// which it hands to onComplete with MinIO's URL and the forwarding
// handler; it returns the proxy's URL.
func completeProxy(t *testing.T, endpoint string, onComplete func(w http.ResponseWriter, r *http.Request, up *url.URL, forward http.Handler)) string {
	t.Helper()
	return interceptProxy(t, endpoint, func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Query().Get("uploadId") != ""
	}, onComplete)
}

// interceptProxy starts a proxy in front of MinIO at endpoint that
// forwards every request but those match picks, which it hands to handle
// with MinIO's URL and the forwarding handler; it returns the proxy's
// URL.
func interceptProxy(t *testing.T, endpoint string, match func(*http.Request) bool, handle func(w http.ResponseWriter, r *http.Request, up *url.URL, forward http.Handler)) string {
	t.Helper()
	up, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(up)
		pr.Out.Host = pr.In.Host // signed by the client: keep it
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !match(r) {
			rp.ServeHTTP(w, r)
			return
		}
		handle(w, r, up, rp)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// viaProxy is a Backend of direct's bucket on MinIO m that sends its
// requests through the proxy at proxyURL, with 3 attempts a request.
func viaProxy(t *testing.T, m *testserver.MinIO, direct *Backend, proxyURL string) *Backend {
	t.Helper()
	o := minioOptions(m)
	o.Endpoint = proxyURL
	o.MaxAttempts = 3
	b, err := New(context.Background(), direct.bucket, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newCutCompleteProxy(t *testing.T, endpoint string, cut int) *cutCompleteProxy {
	t.Helper()
	p := &cutCompleteProxy{statuses: make(chan int, 16)}
	p.cut.Store(int64(cut))
	p.URL = completeProxy(t, endpoint, func(w http.ResponseWriter, r *http.Request, up *url.URL, forward http.Handler) {
		p.completes.Add(1)
		if p.cut.Add(-1) < 0 {
			forward.ServeHTTP(w, r)
			return
		}
		p.statuses <- forwardDetached(r, up)
		panic(http.ErrAbortHandler) // the answer is lost
	})
	return p
}

// forwardDetached sends r to MinIO at up whatever becomes of the
// client's connection, reads the answer whole (MinIO streams whitespace
// before a completion's result) and returns its status (0: none).
func forwardDetached(r *http.Request, up *url.URL) int {
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = up.Scheme, up.Host
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A CompleteMultipartUpload that completed on the server but whose answer
// was lost is the success it was: whether the SDK's retry finds the
// upload gone (NoSuchUpload) or every answer is lost, Put returns the
// object, which holds the data.
func TestCompleteAnswerLost(t *testing.T) {
	m := startMinIO(t)
	ctx := context.Background()
	data := payload(11<<20 + 5)
	for _, c := range []struct {
		name string
		cut  int
	}{{"RetryFindsNoSuchUpload", 1}, {"EveryAnswerLost", 1000}} {
		t.Run(c.name, func(t *testing.T) {
			direct := newMinIOBackend(t, m, minioOptions(m))
			p := newCutCompleteProxy(t, m.Endpoint, c.cut)
			b := viaProxy(t, m, direct, p.URL)
			for i, ifVersion := range []string{"", backend.VersionAbsent} {
				key := fmt.Sprintf("big-%d", i)
				info, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), backend.PutOptions{PartSize: 5 << 20, IfVersion: ifVersion})
				if len(p.statuses) == 0 {
					t.Fatalf("no complete request was cut (%d seen); Put: %+v, %v", p.completes.Load(), info, err)
				}
				if code := <-p.statuses; code != http.StatusOK {
					t.Fatalf("MinIO answered the first complete with %d, want 200", code)
				}
				if err != nil {
					t.Fatalf("Put (IfVersion %q) whose complete succeeded but whose answer was lost: %v (%d complete requests)",
						ifVersion, err, p.completes.Load())
				}
				st, err := direct.Stat(ctx, key)
				if err != nil || st.Version != info.Version || st.Size != int64(len(data)) {
					t.Fatalf("object %+v, %v; Put returned %+v", st, err, info)
				}
				rc, err := direct.ReadRange(ctx, key, st.Version, 0, st.Size)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("object bytes: %d, %v", len(got), err)
				}
				for len(p.statuses) > 0 { // later cut attempts (NoSuchUpload)
					<-p.statuses
				}
				p.cut.Store(int64(c.cut))
			}
			checkNoUploads(t, direct)
		})
	}
}
