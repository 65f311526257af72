package integration

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// watchBucket polls key until stop is closed and counts sightings of a
// partial object (any size other than want).
func watchBucket(t *testing.T, be backend.Backend, key string, want int64, stop <-chan struct{}) *atomic.Int64 {
	partial := &atomic.Int64{}
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if info, err := be.Stat(t.Context(), key); err == nil && info.Size != want {
				partial.Add(1)
			}
		}
	}()
	return partial
}

// TestAsyncUploadSurvivesKill9: kill -9 the mount while an async upload of
// 1 GiB is in flight; the next mount on the same cache dir completes it,
// and no partial object is ever visible in the bucket.
func TestAsyncUploadSurvivesKill9(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	be := w.(backend.Backend)
	cacheDir := t.TempDir()
	size := 1 << 30
	if testing.Short() {
		size = 64 << 20
	}
	want := streamSHA(77, int64(size))
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
	stop := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(stop) })
	partial := watchBucket(t, be, "model.pt", int64(size), stop)
	// The bucket is down from before the close, so the kill lands on an
	// upload certainly under way (an attempt or its retry), never after it.
	// The root is listed first: a new name is then looked up in the
	// cached listing, not in the bucket that is down.
	if _, err := os.ReadDir(m.dir); err != nil {
		t.Fatal(err)
	}
	srv.stop(t)
	closeTook, err := writeStream(filepath.Join(m.dir, "model.pt"), 77, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("async close() of %d MiB took %v", size>>20, closeTook)
	u := waitUpload(t, m, "model.pt", func(u upload) bool { return u.State == "uploading" || u.State == "retrying" })
	if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, m.pid)
	m.pid = 0
	if out, err := exec.Command("umount", "-l", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount -l %s: %v %s", m.dir, err, out)
	}
	srv.restart(t)
	if _, err := be.Stat(t.Context(), "model.pt"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("model.pt in the bucket after a kill during its upload (%s): %v", u.State, err)
	}

	m2 := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
	if out, err := exec.Command(binPath(t), "sync", m2.dir).CombinedOutput(); err != nil {
		t.Fatalf("strata sync after restart: %v\n%s", err, out)
	}
	once.Do(func() { close(stop) })
	got, n, err := bucketSHA(t, w, "model.pt")
	if err != nil || got != want || n != int64(size) {
		t.Fatalf("after restart: %d bytes, sha ok=%v, %v", n, got == want, err)
	}
	if p := partial.Load(); p != 0 {
		t.Fatalf("a partial object was visible %d times", p)
	}
	if ents, _ := os.ReadDir(filepath.Join(cacheDir, "staging")); len(ents) != 0 {
		t.Fatalf("%d staging files left after the upload", len(ents))
	}
}

// TestBackendFailsMidUpload: the bucket goes away under a sync upload:
// close() reports the failure, no partial object appears, the data stays
// readable through the mount, and the upload completes once the bucket is
// back.
func TestBackendFailsMidUpload(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	be := w.(backend.Backend)
	const size = 200 << 20
	want := streamSHA(88, size)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	stop := make(chan struct{})
	defer close(stop)
	partial := watchBucket(t, be, "ckpt.bin", size, stop)
	f, err := os.Create(filepath.Join(m.dir, "ckpt.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyBuffer(onlyWriter{f}, newStream(88, size), make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	// The bucket goes away before close(): the upload close() starts
	// fails, certainly.
	srv.stop(t)
	if err := f.Close(); err == nil {
		t.Fatal("close() returned success while the bucket was down")
	}
	if got, _, err := fileSHA(filepath.Join(m.dir, "ckpt.bin")); err != nil || got != want {
		t.Fatalf("local copy not kept readable: %v", err)
	}
	srv.restart(t)
	if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("strata sync: %v\n%s", err, out)
	}
	if got, _, err := bucketSHA(t, w, "ckpt.bin"); err != nil || got != want {
		t.Fatalf("after the server came back: %v", err)
	}
	if p := partial.Load(); p != 0 {
		t.Fatalf("a partial object was visible %d times", p)
	}
}

func waitExit(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d did not exit", pid)
}
