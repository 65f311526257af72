package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestSendStall: an attempt of a PUT that moves nothing for
// SendStallTimeout (its body not taken, or no answer after it) is cut, and
// the second such attempt fails the put with ErrUnavailable, in about two
// stall timeouts; a body taken slowly but steadily, for longer than the
// stall timeout in all, is not cut. Before, a PUT to an endpoint gone
// silent waited TransferTimeout (10 minutes) an attempt, MaxAttempts times.
func TestSendStall(t *testing.T) {
	const stall = 300 * time.Millisecond
	var mode atomic.Value // "silent", "late", "slow"
	var attempts atomic.Int32
	quit := make(chan struct{}) // a handler that takes no body never sees the client go
	hold := func(r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		attempts.Add(1)
		switch mode.Load() {
		case "silent": // takes nothing, answers nothing
			hold(r)
			return
		case "late": // takes the body, then answers nothing
			_, _ = io.Copy(io.Discard, r.Body)
			hold(r)
			return
		case "slow":
			// A multipart upload whose completion takes 800 ms and keeps
			// the connection alive with a space every 100 ms, as S3 does:
			// never 300 ms without a byte.
			_, _ = io.Copy(io.Discard, r.Body)
			switch {
			case r.Method == http.MethodPost && r.URL.Query().Has("uploads"):
				fmt.Fprint(w, `<InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
				return
			case r.Method == http.MethodPost:
				w.WriteHeader(http.StatusOK)
				for range 8 {
					fmt.Fprint(w, " ")
					w.(http.Flusher).Flush()
					time.Sleep(100 * time.Millisecond)
				}
				fmt.Fprint(w, `<CompleteMultipartUploadResult><Bucket>bucket</Bucket><Key>k</Key><ETag>"0123456789abcdef0123456789abcdef-2"</ETag></CompleteMultipartUploadResult>`)
				return
			}
		}
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // before srv.Close
	b := backendAt(t, srv.URL, func(o *Options) {
		o.MaxAttempts, o.MaxBackoff = 5, 10*time.Millisecond
		o.SendStallTimeout, o.TransferTimeout = stall, 20*time.Second
	})
	body := bytes.Repeat([]byte("x"), 64<<10)
	put := func() (time.Duration, error) {
		start := time.Now()
		_, err := b.Put(context.Background(), "k", bytes.NewReader(body), int64(len(body)), backend.PutOptions{})
		return time.Since(start), err
	}
	for _, m := range []string{"silent", "late"} {
		mode.Store(m)
		attempts.Store(0)
		took, err := put()
		if !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, context.Canceled) {
			t.Errorf("%s: put: %v, want ErrUnavailable", m, err)
		}
		if n := attempts.Load(); n != silentAfter || took > 2*silentAfter*stall+time.Second {
			t.Errorf("%s: %d attempts in %v, want %d in about %v", m, n, took, silentAfter, silentAfter*stall)
		}
	}
	mode.Store("slow")
	attempts.Store(0)
	big := bytes.Repeat([]byte("y"), 10<<20) // two 5 MiB parts
	start := time.Now()
	_, err := b.Put(context.Background(), "k", bytes.NewReader(big), int64(len(big)), backend.PutOptions{PartSize: 5 << 20})
	if took := time.Since(start); err != nil || attempts.Load() != 4 {
		t.Errorf("a completion answered over %v with a space every 100 ms (stall timeout %v): %v after %d requests (want 4: create, 2 parts, complete)", took, stall, err, attempts.Load())
	}
}
