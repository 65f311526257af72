package gcs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestUploadStallCutsOnlySilence: uploadStall cuts an upload request that
// moves nothing for its bound (no answer), with a stallError the library
// retries as a timeout, but not one whose answer keeps moving (headers,
// then a byte every 100 ms, for four times the bound), nor a request
// that is not an upload.
func TestUploadStallCutsOnlySilence(t *testing.T) {
	const d = 300 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Query().Get("mode") {
		case "silent":
			<-r.Context().Done()
		case "drip":
			time.Sleep(d * 2 / 3)
			w.WriteHeader(http.StatusOK)
			for range 12 {
				_, _ = w.Write([]byte(" "))
				w.(http.Flusher).Flush()
				time.Sleep(d / 3)
			}
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: uploadStall{rt: http.DefaultTransport, d: d}}
	do := func(method, path string) (time.Duration, error) {
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(make([]byte, 64<<10)))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return time.Since(start), err
	}

	took, err := do(http.MethodPut, "/upload/storage/v1/b/bkt/o?mode=silent")
	if !isStall(err) || !shouldRetry(err) {
		t.Errorf("an unanswered upload: %v after %v; want a stallError, retried", err, took)
	}
	if took < d || took > 5*d {
		t.Errorf("an unanswered upload was cut after %v; want about %v", took, d)
	}
	if took, err := do(http.MethodPut, "/upload/storage/v1/b/bkt/o?mode=drip"); err != nil {
		t.Errorf("an upload whose answer keeps moving was cut after %v: %v", took, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/storage/v1/b/bkt/o?mode=silent", nil)
	if _, err := c.Do(req); isStall(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a silent non-upload request: %v; want it left to its own deadline", err)
	}
}

// TestUploadToASilentEndpointIsUnavailable: every upload request goes
// unanswered. Put gives up after silentAfter attempts cut by the stall
// bound, with backend.ErrUnavailable, and does not then ask the object
// (which could only wait out its own timeouts): before, the close of a
// small file against a stopped server took 151 s.
func TestUploadToASilentEndpointIsUnavailable(t *testing.T) {
	p, _, direct := faultSetup(t)
	b := newTestBackend(t, p.URL, "bkt", func(o *Options) {
		fastRetries(o)
		o.RequestTimeout = 20 * time.Second // only the stall bound may cut
		o.RetryDeadline = 20 * time.Second
	})
	old := mustPut(t, direct, "k", []byte("previous"), backend.PutOptions{})
	var uploads, others atomic.Int64
	p.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !isUpload(r) {
			others.Add(1)
			return false
		}
		uploads.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // the server then notices the client going
		<-r.Context().Done()
		return true
	})
	data := testData(200<<10, 9)
	start := time.Now()
	_, err := b.Put(context.Background(), "k", bytes.NewReader(data), int64(len(data)), backend.PutOptions{IfVersion: old.Version})
	took := time.Since(start)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Put to a silent endpoint: %v after %v; want ErrUnavailable", err, took)
	}
	if took > 5*time.Second {
		t.Errorf("Put gave up after %v; want about %d stall bounds (300ms)", took, silentAfter)
	}
	if n := uploads.Load(); n != silentAfter {
		t.Errorf("%d upload attempts; want %d", n, silentAfter)
	}
	if n := others.Load(); n != 0 {
		t.Errorf("%d other requests (the object asked) after a silent upload; want none", n)
	}
}

// TestUploadDroppedInSilenceIsUnavailable: every upload request goes
// unanswered and the connection is then dropped by the other end a
// little before the stall bound would cut it (a peer's or a proxy's idle
// timeout: MinIO's is 30 s, the bound's too). Such an attempt is as
// unanswered as a cut one: Put gives up after silentAfter of them, with
// backend.ErrUnavailable. Before, the drops were retried as any network
// error, until MaxAttempts or RetryDeadline.
func TestUploadDroppedInSilenceIsUnavailable(t *testing.T) {
	p, _, direct := faultSetup(t)
	b := newTestBackend(t, p.URL, "bkt", func(o *Options) {
		fastRetries(o)
		o.MaxAttempts = 5
		o.RequestTimeout = 20 * time.Second // only the stall bound counts
		o.RetryDeadline = 20 * time.Second
	})
	old := mustPut(t, direct, "k", []byte("previous"), backend.PutOptions{})
	var uploads atomic.Int64
	p.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !isUpload(r) {
			return false
		}
		uploads.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			time.Sleep(240 * time.Millisecond) // 0.8 of the 300 ms bound
			conn.Close()
		}
		return true
	})
	data := testData(200<<10, 10)
	start := time.Now()
	_, err := b.Put(context.Background(), "k", bytes.NewReader(data), int64(len(data)), backend.PutOptions{IfVersion: old.Version})
	took := time.Since(start)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Put whose attempts were dropped after 240 ms of silence: %v after %v; want ErrUnavailable", err, took)
	}
	if n := uploads.Load(); n != silentAfter {
		t.Errorf("%d upload attempts in %v; want %d", n, took, silentAfter)
	}
}
