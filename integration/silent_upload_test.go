package integration

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// uploadSilentBound is README's bound for a close (--upload sync) whose
// upload meets an endpoint gone silent: an attempt that moves nothing
// (no byte of its body taken, no answer) for 30 s is cut, a second such
// attempt fails the upload, with the retry's backoff (at most 10 s) in
// between; then close returns.
const uploadSilentBound = 2*30*time.Second + 15*time.Second

// TestUploadToASilentEndpoint: the network goes silent (toxiproxy holds
// every byte, connections stay open) just before a rewritten file is
// closed, a small one (one PutObject) and one big enough for parts. The
// close returns EIO within uploadSilentBound, the bucket keeps the
// previous object, and once the network is back the kept upload lands by
// itself. Before the fix an attempt of a request carrying data was bound
// only by its 10-minute transfer timeout, ten attempts in all: the close
// of a 1 MB file hung for more than 11 minutes (seen by hand with MinIO
// stopped by SIGSTOP).
func TestUploadToASilentEndpoint(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // waits out stall timeouts
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	tp := startToxiproxy(t)
	for _, tc := range []struct {
		name, key string
		size      int
	}{
		{"one request", "small.ckpt", 3 << 20},
		{"in parts", "big.ckpt", 80 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := randData(90, 1<<20)
			put(t, w, map[string][]byte{tc.key: old})
			proxy := "upload-silent-" + tc.key
			addr := tp.proxy(t, proxy, srv.m.Addr)
			m := startMount(t, srv, srv.source(bucket, ""), "", endpointOf(addr)...)
			closeIntoSilence(t, srv, m, w, tc.key, randData(91, tc.size), func() {
				tp.toxic(t, proxy, "hole-up", "timeout", "upstream", 1, map[string]int64{"timeout": 0})
				tp.toxic(t, proxy, "hole-down", "timeout", "downstream", 1, map[string]int64{"timeout": 0})
			}, func() {
				if h, _, err := bucketSHA(t, w, tc.key); err != nil || h != sha(old) {
					t.Errorf("the bucket's %s after the failed close: %v (the previous object: %v)", tc.key, err, h == sha(old))
				}
				tp.removeToxic(t, proxy, "hole-up")
				tp.removeToxic(t, proxy, "hole-down")
			})
		})
	}
}

// TestUploadToASilentGCSEndpoint is TestUploadToASilentEndpoint on GCS:
// fake-gcs-server is stopped with SIGSTOP just before the close of a
// rewritten file, one sent in a single request and one in a resumable
// session of chunks; the kernel still accepts connections, nothing is
// answered. The close returns EIO within uploadSilentBound, and once the
// server runs again the kept upload lands. Before, the close took 151 s
// for the small file and 90 s for the other (this test): each
// chunk attempt waited out its transfer timeout until the retry deadline,
// then the check of the object that follows an unanswered final request
// waited out every attempt of its own.
func TestUploadToASilentGCSEndpoint(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // waits out stall timeouts
	for _, tc := range []struct {
		name, key string
		size      int
	}{
		{"one request", "small.ckpt", 3 << 20},
		{"in chunks", "big.ckpt", 40 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startFakeGCS(t).(*gcsServer) // its own: paused below
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			old := randData(92, 1<<20)
			put(t, w, map[string][]byte{tc.key: old})
			m := startMount(t, srv, srv.source(bucket, ""), "")
			// The bucket cannot be read while the server is stopped, and the
			// kept upload may be retried as soon as it runs again: that the
			// previous object stays in between is the S3 test's to show.
			closeIntoSilence(t, srv, m, w, tc.key, randData(93, tc.size), func() {
				if err := srv.f.Pause(); err != nil {
					t.Fatal(err)
				}
			}, func() {
				if err := srv.f.Resume(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// closeIntoSilence writes data over key through m, makes the endpoint go
// silent (silence), and closes: the close must return EIO within
// uploadSilentBound. Then speak brings the endpoint back, and the upload
// the mount kept must land (`strata uploads --retry` sends it at once).
func closeIntoSilence(t *testing.T, srv server, m *mount, w backend.Writer, key string, data []byte, silence, speak func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(m.dir, key), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	silence()
	start := time.Now()
	err = f.Close()
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) || took > uploadSilentBound {
		t.Errorf("close with the endpoint silent: %v after %v (want EIO within %v)", err, took.Round(time.Millisecond), uploadSilentBound)
	}
	t.Logf("close: %v after %v", err, took.Round(time.Millisecond))
	speak()
	if out, errOut, err := runStrata(t, srv, "uploads", "--retry", m.dir); err != nil {
		t.Errorf("strata uploads --retry: %v %s%s", err, out, errOut)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if h, _, err := bucketSHA(t, w, key); err == nil && h == sha(data) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not in the bucket 90 s after the endpoint came back", key)
		}
	}
}
