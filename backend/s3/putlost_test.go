package s3

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratafs/strata/backend"
)

// cutPutProxy sits in front of MinIO and loses the answer of the first
// one-request PutObject (PUT without uploadId): it forwards the request,
// lets MinIO store the object, then closes stop (if set) and cuts the
// connection instead of answering. Every other request passes.
type cutPutProxy struct {
	URL  string
	puts atomic.Int64
	stop chan struct{}
	once sync.Once
	// status is MinIO's answer to the cut request.
	status chan int
}

func newCutPutProxy(t *testing.T, endpoint string, stop chan struct{}) *cutPutProxy {
	t.Helper()
	p := &cutPutProxy{stop: stop, status: make(chan int, 1)}
	p.URL = interceptProxy(t, endpoint, func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("uploadId") == "" && p.puts.Add(1) == 1
	}, func(w http.ResponseWriter, r *http.Request, up *url.URL, _ http.Handler) {
		p.status <- forwardDetached(r, up)
		if p.stop != nil {
			p.once.Do(func() { close(p.stop) })
		}
		panic(http.ErrAbortHandler) // the answer is lost
	})
	return p
}

// TestSinglePutAnswerLost: a one-request PutObject that MinIO stored but
// whose answer was lost is the success it was. When the upload was
// stopped meanwhile (its file deleted or renamed), the SDK's retry is
// refused after the stop, and Put said ErrStopped, "nothing appeared",
// while the object was in the bucket: the write path then never took it
// down, and a file deleted during its upload came back. When nothing
// stopped it, a retry conditional on the key being absent found the
// object the lost attempt had made (412). In both cases the object is
// asked (its ETag against the bytes' MD5) before an error is returned.
func TestSinglePutAnswerLost(t *testing.T) {
	m := startMinIO(t)
	ctx := context.Background()
	data := payload(300<<10 + 3)
	for _, c := range []struct {
		name      string
		stopped   bool
		ifVersion string
	}{
		{"StoppedMeanwhile", true, backend.VersionAbsent},
		{"StoppedMeanwhileUnconditional", true, ""},
		{"RetryFindsItsOwnObject", false, backend.VersionAbsent},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct := newMinIOBackend(t, m, minioOptions(m))
			var stop chan struct{}
			if c.stopped {
				stop = make(chan struct{})
			}
			p := newCutPutProxy(t, m.Endpoint, stop)
			b := viaProxy(t, m, direct, p.URL)
			key := "small-" + c.name
			info, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), backend.PutOptions{IfVersion: c.ifVersion, Stop: stop})
			if code := <-p.status; code != http.StatusOK {
				t.Fatalf("MinIO answered the cut put with %d, want 200", code)
			}
			if err != nil {
				t.Fatalf("Put stored but its answer lost: %v (%d puts sent); the object is in the bucket", err, p.puts.Load())
			}
			st, err := direct.Stat(ctx, key)
			if err != nil || st.Version != info.Version || st.Size != int64(len(data)) {
				t.Fatalf("object %+v, %v; Put returned %+v", st, err, info)
			}
		})
	}
}

// TestSinglePutStoppedBeforeSendingAsksNothing: a put stopped before its
// request went out sends nothing and says ErrStopped; nothing is asked of
// the bucket either (the check above is for attempts that were sent).
func TestSinglePutStoppedBeforeSendingAsksNothing(t *testing.T) {
	m := startMinIO(t)
	ctx := context.Background()
	direct := newMinIOBackend(t, m, minioOptions(m))
	var requests atomic.Int64
	proxyURL := interceptProxy(t, m.Endpoint, func(*http.Request) bool { requests.Add(1); return false }, nil)
	b := viaProxy(t, m, direct, proxyURL)
	stop := make(chan struct{})
	close(stop)
	_, err := b.Put(ctx, "never", bytes.NewReader([]byte("x")), 1, backend.PutOptions{Stop: stop})
	if !errors.Is(err, backend.ErrStopped) {
		t.Errorf("Put stopped before sending: %v, want ErrStopped", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent for a put stopped before it began; want 0", n)
	}
}
