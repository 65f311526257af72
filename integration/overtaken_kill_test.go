package integration

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestDeleteInFlightThenKill9: a file is deleted while its upload
// request is on its way; the bucket stores it after the unlink returned,
// and the mount is killed with SIGKILL before the answer comes back (the
// proxy holds it), so it never takes the object down itself. The next
// mount on the same cache must: the deleted file does not come back, in
// the bucket or the mount. Before, the delete took the upload out of the
// journal at once, and the object stayed in the bucket for good.
func TestDeleteInFlightThenKill9(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		p, proxyURL := newLateUploadProxy(t, srv.flags()[1], 4*time.Second)
		cacheDir := t.TempDir()
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, append(endpointOf(proxyURL), "--upload", "async", "--upload-delay", "0")...)
		path := filepath.Join(m.dir, "checkpoint-7", "model.bin")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		p.armTo("", "late")
		if err := os.WriteFile(path, []byte("weights of a checkpoint deleted at once"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.waitSent(t)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		p.waitDone(t) // in the bucket; the answer is held 4 s more
		m.kill9()
		if _, _, err := bucketSHA(t, w, "checkpoint-7/model.bin"); err != nil {
			t.Fatalf("the held upload is not in the bucket at the kill: %v", err)
		}

		// The same endpoint (the proxy, disarmed): the journal's uploads
		// are the source's, which the endpoint is part of.
		m = startMount(t, srv, srv.source(bucket, ""), cacheDir, endpointOf(proxyURL)...)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			_, _, err := bucketSHA(t, w, "checkpoint-7/model.bin")
			if errors.Is(err, backend.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the deleted file is still in the bucket 20 s after the next mount (%v)", err)
			}
		}
		if _, err := os.Stat(filepath.Join(m.dir, "checkpoint-7", "model.bin")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the deleted file through the next mount: %v", err)
		}
	})
}
