package gcs

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stratafs/strata/backend"
)

// isOneShotUpload matches a one-request upload (uploadType=multipart),
// what Put sends for an object smaller than one chunk.
func isOneShotUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/") && r.URL.Query().Get("uploadType") == "multipart"
}

// TestStoppedUploadAnsweredByAGateway: a one-request upload reaches the
// server, which stores the object, but the answer the client gets is a
// gateway's 502 (a load balancer or proxy that lost the server's answer),
// and the upload was stopped meanwhile (its file deleted or renamed), so
// no retry goes out. Put took the 502 for the server's verdict and said
// nothing had appeared: the write path never took the object down, and a
// file deleted during its upload stayed in the bucket. A 5xx says nothing
// of whether the request landed: the object is asked once, and Put
// returns it.
func TestStoppedUploadAnsweredByAGateway(t *testing.T) {
	p, b, direct := faultSetup(t)
	ctx := context.Background()
	data := testData(70000, 9)
	stop := make(chan struct{})
	var once sync.Once
	p.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !isOneShotUpload(r) {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		code, err := p.forward(r, body)
		if err != nil || code != http.StatusOK {
			t.Errorf("the upload reached the server with %d, %v; want 200", code, err)
		}
		once.Do(func() { close(stop) })
		w.WriteHeader(http.StatusBadGateway)
		return true
	})
	got, err := b.Put(ctx, "gw", bytes.NewReader(data), int64(len(data)), backend.PutOptions{IfVersion: backend.VersionAbsent, Stop: stop})
	if p.hits.Load() != 1 {
		t.Fatalf("%d uploads reached the proxy's fault, want 1 (no retry after the stop)", p.hits.Load())
	}
	if err != nil {
		t.Fatalf("Put whose upload landed behind a 502: %v", err)
	}
	st, err := direct.Stat(ctx, "gw")
	if err != nil || st.Version != got.Version || st.Size != int64(len(data)) {
		t.Fatalf("object %+v, %v; Put returned %+v", st, err, got)
	}
}
