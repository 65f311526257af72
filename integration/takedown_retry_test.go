package integration

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestAFailedTakeDownIsRetriedAgainstTheBucket: a file deleted while its
// upload request is on its way lands in the bucket anyway, and the
// bucket then refuses its take-down (every DELETE answered 503 for a
// while). The mount must retry it, with no remount, within 30 s of the
// bucket accepting deletes again, and not show the name meanwhile; `strata
// uploads` lists the take-down and `strata sync` waits for it. Before,
// the failure was logged and the deleted file stayed in the bucket for
// good; then sync returned with it still there.
func TestAFailedTakeDownIsRetriedAgainstTheBucket(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		p, m, w, cacheDir := deletedInFlight(t, srv, func(p *lateUploadProxy) { p.refuse.Store(true) })
		key, dir := "checkpoint-3/model.bin", filepath.Join(m.dir, "checkpoint-3")
		if _, _, err := bucketSHA(t, w, key); err != nil {
			t.Fatalf("the late object, while deletes are refused: %v", err)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Errorf("the directory while the take-down is refused: %v, %v; want it empty", ents, err)
		}
		waitUpload(t, m, key, func(u upload) bool { return u.State == "taking down" && u.Error != "" })
		// strata sync must wait for the take-down: the bucket is not in
		// step with the mount while the deleted file is in it.
		synced := make(chan error, 1)
		go func() {
			out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, out)
			}
			synced <- err
		}()
		select {
		case err := <-synced:
			_, _, inBucket := bucketSHA(t, w, key)
			t.Fatalf("strata sync returned (%v) while the take-down was refused; the deleted file's object: %v (nil: still there)", err, inBucket)
		case <-time.After(time.Second):
		}
		p.refuse.Store(false)
		accepted := time.Now()
		select {
		case err := <-synced:
			if err != nil {
				t.Fatalf("strata sync: %v", err)
			}
			t.Logf("strata sync returned %v after deletes were accepted again", time.Since(accepted))
		case <-time.After(30 * time.Second): // README: tries at most 5 s apart, each with the client's own retries
			t.Fatalf("strata sync still waits 30 s after deletes were accepted again:\n%s", logTail(cacheDir))
		}
		if _, _, err := bucketSHA(t, w, key); !errors.Is(err, backend.ErrNotExist) {
			t.Fatalf("strata sync returned with the deleted file in the bucket (%v):\n%s", err, logTail(cacheDir))
		}
	})
}

// TestATakeDownForbiddenIsReportedAndRetriedOnRequest: as above, but the
// bucket answers every DELETE 403 AccessDenied (credentials without
// delete rights): no retry can fix that. `strata sync` must not wait for
// ever: it reports the take-down failed and exits non-zero, `strata
// uploads` lists it failed, and the name shows the object the bucket
// keeps. Once deletes are allowed, `strata uploads --retry` removes it.
func TestATakeDownForbiddenIsReportedAndRetriedOnRequest(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		p, m, w, cacheDir := deletedInFlight(t, srv, func(p *lateUploadProxy) { p.forbid.Store(true) })
		key := "checkpoint-3/model.bin"
		out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "could not be taken down") {
			t.Fatalf("strata sync: %v\n%s\nwant it to report the take-down failed", err, out)
		}
		waitUpload(t, m, key, func(u upload) bool { return u.State == "failed" })
		if _, _, err := bucketSHA(t, w, key); err != nil {
			t.Fatalf("the object, with deletes forbidden: %v", err)
		}
		if _, err := os.Stat(filepath.Join(m.dir, key)); err != nil {
			t.Errorf("the name does not show the object the bucket keeps: %v", err)
		}
		p.forbid.Store(false)
		if out, err := exec.Command(binPath(t), "uploads", "--retry", m.dir, key).CombinedOutput(); err != nil {
			t.Fatalf("strata uploads --retry: %v\n%s", err, out)
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			_, _, err := bucketSHA(t, w, key)
			if errors.Is(err, backend.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the object is still in the bucket 60 s after the retry (%v):\n%s", err, logTail(cacheDir))
			}
		}
		if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
			t.Errorf("strata sync after the retry: %v\n%s", err, out)
		}
	})
}

// TestAForbiddenTakeDownCanBeDiscarded: a take-down the bucket refuses
// for good can be given up, as an upload can: `strata uploads --discard`
// answered "no upload pending or failed" for the row `strata uploads`
// listed failed, `strata sync` kept failing on it, and every later mount
// tried it again. Discarded, the bucket keeps the object, the name shows
// it, the listing drops it, sync succeeds, and the next mount (deletes
// still forbidden) does not try it again.
func TestAForbiddenTakeDownCanBeDiscarded(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		_, m, w, cacheDir := deletedInFlight(t, srv, func(p *lateUploadProxy) { p.forbid.Store(true) })
		key := "checkpoint-3/model.bin"
		if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err == nil {
			t.Fatalf("strata sync succeeded with the take-down forbidden:\n%s", out)
		}
		listed, err := exec.Command(binPath(t), "uploads", m.dir).CombinedOutput()
		if err != nil || !strings.Contains(string(listed), "take-down failed") {
			t.Errorf("strata uploads: %v\n%s\nwant the take-down listed failed", err, listed)
		}
		out, err := exec.Command(binPath(t), "uploads", "--discard", m.dir, key).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "no longer taken down") {
			t.Fatalf("strata uploads --discard: %v\n%s", err, out)
		}
		for _, u := range listUploads(t, m) {
			if u.Key == key {
				t.Errorf("strata uploads still lists %+v", u)
			}
		}
		if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
			t.Errorf("strata sync after the discard: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(m.dir, key)); err != nil {
			t.Errorf("the name does not show the object the bucket keeps: %v", err)
		}
		m.unmount()
		cmd := exec.Command(binPath(t), m.args...)
		cmd.Env = m.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mount again: %v\n%s", err, out)
		}
		defer unmountAndWait(t, m.dir, cacheDir)
		if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
			t.Errorf("strata sync on the next mount (the discarded take-down tried again?): %v\n%s", err, out)
		}
		if _, _, err := bucketSHA(t, w, key); err != nil {
			t.Errorf("the object, after the discard: %v", err)
		}
	})
}

// deletedInFlight mounts srv's new bucket (--upload async, no delay)
// through a lateUploadProxy, writes checkpoint-3/model.bin, deletes it
// while its upload request is held on its way, turns refusal on (the
// unlink's own delete went through: nothing was there yet), lets the
// request land, and waits until the mount has logged the refused
// take-down, its client's own retries included.
func deletedInFlight(t *testing.T, srv server, refusal func(*lateUploadProxy)) (*lateUploadProxy, *mount, backend.Writer, string) {
	t.Helper()
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	p, proxyURL := newLateUploadProxy(t, srv.flags()[1], 2*time.Second)
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, append(endpointOf(proxyURL), "--upload", "async", "--upload-delay", "0")...)
	if err := os.MkdirAll(filepath.Join(m.dir, "checkpoint-3"), 0o755); err != nil {
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
	refusal(p)
	p.waitDone(t) // in the bucket; its answer comes now, and the take-down is refused
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logTail(cacheDir), "removing an upload overtaken by a rename or delete"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no refused take-down in the log (%d deletes refused):\n%s", p.refusals.Load(), logTail(cacheDir))
		}
	}
	return p, m, w, cacheDir
}

// refused is an error answer to r, of status and S3 error code, as S3
// gives it (GCS clients read its status alone).
func refused(r *http.Request, status int, code string) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>refused by the test</Message></Error>`
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}
