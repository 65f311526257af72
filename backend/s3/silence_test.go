package s3

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

// TestSilenceEndedByThePeer: an endpoint that answers nothing and then
// drops the connection a little before the attempt's own bound would cut
// it (MinIO closes a connection that sent it nothing after 30 s, the
// stall bound is 30 s too; a proxy or a load balancer has its own idle
// timeout) is as silent as one that holds it open: the second such
// attempt fails the operation with ErrUnavailable, as two cut attempts
// do. Before, the dropped attempts were not counted, and a close with
// --upload sync into a silent network returned EIO after 82 s or 93 s
// instead of about 60 s (TestUploadToASilentEndpoint under load: which
// came first, the cut or MinIO's close, was a race).
func TestSilenceEndedByThePeer(t *testing.T) {
	// The drop comes 0.8 of the bound after the request, and counts from
	// half of it: a body still being taken 300 ms into the attempt (a
	// loaded machine) leaves it counted.
	const bound = time.Second
	const dropAfter = bound * 8 / 10
	var attempts atomic.Int32
	var takeBody atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		if takeBody.Load() {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		time.Sleep(dropAfter)
		conn.Close() // no answer, then the connection goes
	}))
	t.Cleanup(srv.Close)
	b := backendAt(t, srv.URL, func(o *Options) {
		o.MaxAttempts, o.MaxBackoff = 5, 10*time.Millisecond
		o.SendStallTimeout, o.RequestTimeout, o.TransferTimeout = bound, bound, 20*time.Second
	})
	body := bytes.Repeat([]byte("x"), 64<<10)
	for _, tc := range []struct {
		name string
		take bool
		op   func() error
	}{
		{"put, body not taken", false, func() error {
			_, err := b.Put(context.Background(), "k", bytes.NewReader(body), int64(len(body)), backend.PutOptions{})
			return err
		}},
		{"put, body taken", true, func() error {
			_, err := b.Put(context.Background(), "k", bytes.NewReader(body), int64(len(body)), backend.PutOptions{})
			return err
		}},
		{"delete (a metadata request)", false, func() error { return b.Delete(context.Background(), "k") }},
	} {
		takeBody.Store(tc.take)
		attempts.Store(0)
		start := time.Now()
		err := tc.op()
		took := time.Since(start)
		if !errors.Is(err, backend.ErrUnavailable) || !silent(err) {
			t.Errorf("%s: %v, want ErrUnavailable from an endpoint taken for silent", tc.name, err)
		}
		if n := attempts.Load(); n != silentAfter {
			t.Errorf("%s: %d attempts in %v, want %d (each %v of silence, then the connection dropped)", tc.name, n, took, silentAfter, dropAfter)
		}
	}
}
