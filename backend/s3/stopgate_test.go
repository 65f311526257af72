package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratafs/strata/backend"
)

// refuseCompleteProxy sits in front of MinIO and answers the first
// CompleteMultipartUpload (POST ?uploadId=) with a 503 the SDK retries,
// closing stop as it does: an upload stopped (its file renamed) while its
// last request was out, and the bucket refused it.
type refuseCompleteProxy struct {
	URL       string
	completes atomic.Int64
	stop      chan struct{}
	once      sync.Once
}

func newRefuseCompleteProxy(t *testing.T, endpoint string) *refuseCompleteProxy {
	t.Helper()
	p := &refuseCompleteProxy{stop: make(chan struct{})}
	p.URL = completeProxy(t, endpoint, func(w http.ResponseWriter, r *http.Request, _ *url.URL, forward http.Handler) {
		if p.completes.Add(1) > 1 {
			forward.ServeHTTP(w, r)
			return
		}
		p.once.Do(func() { close(p.stop) })
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<Error><Code>SlowDown</Code><Message>slow down</Message></Error>`)
	})
	return p
}

// TestCompleteStoppedIsNotRetried: a completion of an upload sent in
// parts (the write path's eager upload) stopped while its request was out
// sends no retry after the stop, as Put does (backend.PutOptions.Stop):
// a retry would make the object after the rename or delete that stopped
// it had returned. The bucket refused the request, so nothing appeared,
// and Complete says so (ErrStopped).
func TestCompleteStoppedIsNotRetried(t *testing.T) {
	m := startMinIO(t)
	ctx := context.Background()
	direct := newMinIOBackend(t, m, minioOptions(m))
	p := newRefuseCompleteProxy(t, m.Endpoint)
	b := viaProxy(t, m, direct, p.URL)
	data := payload(5<<20 + 7)
	up, err := b.BeginParts(ctx, "ckpt.pt")
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for i, off := range []int64{0, 5 << 20} {
		tag, err := up.SendPart(ctx, i+1, bytes.NewReader(data), off, min(5<<20, int64(len(data))-off))
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	_, err = up.Complete(ctx, tags, int64(len(data)), backend.CompleteOptions{Stop: p.stop})
	if n := p.completes.Load(); n != 1 {
		t.Errorf("%d complete requests; want 1 (no retry after the stop)", n)
	}
	if !errors.Is(err, backend.ErrStopped) {
		t.Errorf("Complete stopped and refused: %v, want ErrStopped", err)
	}
	if _, err := direct.Stat(ctx, "ckpt.pt"); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("a stopped completion left an object: Stat = %v", err)
	}
	checkNoUploads(t, direct)
}
