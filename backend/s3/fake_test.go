package s3

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeS3 serves one object at /bucket/obj (path style) with Range and
// If-Match, and misbehaves on request: for tests of the paths a real
// server does not take on demand.
type fakeS3 struct {
	data []byte
	etag string

	mu          sync.Mutex
	fail5xx     int                                      // answer the next N requests with 503
	misbehave   func(w http.ResponseWriter, body []byte) // for GET bodies; nil = normal
	delay       time.Duration                            // before answering each request
	ignoreRange bool

	requests atomic.Int32
	gets     atomic.Int32
	stop     chan struct{} // closed at cleanup: releases stalled handlers
}

func newFake(t *testing.T, data []byte) (*fakeS3, *Backend) {
	t.Helper()
	f := &fakeS3{data: data, etag: "0123456789abcdef0123456789abcdef", stop: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(func() { close(f.stop); srv.Close() })
	return f, backendAt(t, srv.URL, func(o *Options) {
		o.MaxAttempts = 3
		o.MaxBackoff = 10 * time.Millisecond
		o.RequestTimeout = 2 * time.Second
		o.ReadStallTimeout = 200 * time.Millisecond
		o.ReadResumes = 2
	})
}

// backendAt is a path-style Backend of "bucket" at a test server's URL,
// with test credentials; tune (if any) adjusts the options first.
func backendAt(t *testing.T, endpoint string, tune ...func(*Options)) *Backend {
	t.Helper()
	o := DefaultOptions()
	o.Endpoint, o.Region, o.ForcePathStyle = endpoint, "us-east-1", true
	o.AccessKeyID, o.SecretAccessKey = "ak", "sk"
	for _, fn := range tune {
		fn(&o)
	}
	b, err := New(context.Background(), "bucket", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	fail := f.fail5xx > 0
	if fail {
		f.fail5xx--
	}
	delay, misbehave, ignoreRange := f.delay, f.misbehave, f.ignoreRange
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<Error><Code>SlowDown</Code><Message>slow down</Message></Error>`)
		return
	}
	if r.URL.Path != "/bucket/obj" {
		w.WriteHeader(http.StatusNotFound)
		if r.Method != http.MethodHead {
			fmt.Fprint(w, `<Error><Code>NoSuchKey</Code><Message>no</Message></Error>`)
		}
		return
	}
	if im := r.Header.Get("If-Match"); im != "" && strings.Trim(im, `"`) != f.etag {
		w.WriteHeader(http.StatusPreconditionFailed)
		if r.Method != http.MethodHead {
			fmt.Fprint(w, `<Error><Code>PreconditionFailed</Code><Message>no</Message></Error>`)
		}
		return
	}
	w.Header().Set("ETag", `"`+f.etag+`"`)
	w.Header().Set("Last-Modified", time.Unix(1700000000, 0).UTC().Format(http.TimeFormat))
	body := f.data
	status := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && !ignoreRange {
		var a, z int
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &a, &z); err != nil {
			http.Error(w, "the fake serves closed ranges only: "+rg, http.StatusBadRequest)
			return
		}
		z = min(z, len(f.data)-1)
		body = f.data[a : z+1]
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, z, len(f.data)))
		status = http.StatusPartialContent
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	f.gets.Add(1)
	if misbehave != nil {
		misbehave(w, body)
		return
	}
	send(w, body)
}

// send writes a body. The fake has no one to report a failed write to:
// the client, gone away, sees a short body.
func send(w http.ResponseWriter, body []byte) {
	_, _ = w.Write(body)
}

// cutAfter writes k bytes of the body, then drops the connection.
func (f *fakeS3) cutAfter(k int, times int) {
	var n atomic.Int32
	f.mu.Lock()
	defer f.mu.Unlock()
	f.misbehave = func(w http.ResponseWriter, body []byte) {
		if int(n.Add(1)) > times {
			send(w, body)
			return
		}
		send(w, body[:min(k, len(body))])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
}

// stallAfter writes k bytes of the body, then stops sending until the
// client goes away.
func (f *fakeS3) stallAfter(k int, times int) {
	var n atomic.Int32
	f.mu.Lock()
	defer f.mu.Unlock()
	f.misbehave = func(w http.ResponseWriter, body []byte) {
		if int(n.Add(1)) > times {
			send(w, body)
			return
		}
		send(w, body[:min(k, len(body))])
		w.(http.Flusher).Flush()
		select {
		case <-f.stop:
		case <-time.After(time.Minute):
		}
	}
}

func readAll(t *testing.T, b *Backend, version string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := b.ReadRange(context.Background(), "obj", version, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(rc)
	return buf.Bytes(), err
}

// set changes the fake's behaviour under its lock.
func (f *fakeS3) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}
