package integration

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestAFailedTakeDownIsRetriedAgainstTheBucket: a file deleted while its
// upload request is on its way lands in the bucket anyway, and the
// bucket then refuses its take-down (every DELETE answered 503 for a
// while). The mount must retry it, with no remount, once the bucket
// accepts deletes again, and not show the name meanwhile. Before, the
// failure was logged and the deleted file stayed in the bucket for good.
func TestAFailedTakeDownIsRetriedAgainstTheBucket(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		p, proxyURL := newLateUploadProxy(t, srv.flags()[1], 2*time.Second)
		cacheDir := t.TempDir()
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, append(endpointOf(proxyURL), "--upload", "async", "--upload-delay", "0")...)
		dir := filepath.Join(m.dir, "checkpoint-3")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		key := "checkpoint-3/model.bin"
		p.armFor("")
		if err := os.WriteFile(filepath.Join(m.dir, key), []byte("weights of checkpoint 3"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.waitSent(t)
		if err := os.Remove(filepath.Join(m.dir, key)); err != nil {
			t.Fatal(err)
		}
		p.refuse.Store(true) // the unlink's own delete went through: nothing was there yet
		p.waitDone(t)        // in the bucket; its answer comes now, and the take-down is refused
		// The take-down refused, its client's own retries included (the
		// warning, worded alike before the fix).
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logTail(cacheDir), "removing an upload overtaken by a rename or delete"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no refused take-down in the log (%d deletes refused):\n%s", p.refusals.Load(), logTail(cacheDir))
			}
		}
		if _, _, err := bucketSHA(t, w, key); err != nil {
			t.Fatalf("the late object, while deletes are refused: %v", err)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Errorf("the directory while the take-down is refused: %v, %v; want it empty", ents, err)
		}
		p.refuse.Store(false)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			_, _, err := bucketSHA(t, w, key)
			if errors.Is(err, backend.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the deleted file is still in the bucket 60 s after deletes were accepted again (%v):\n%s", err, logTail(cacheDir))
			}
		}
	})
}

// refused is a 503 answer to r, as S3 gives it (GCS clients read its
// status alone).
func refused(r *http.Request) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>refused by the test</Message></Error>`
	return &http.Response{
		StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}
