package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestOvertakenInFlightThenKill9: a file is deleted, or renamed, while
// its upload request is on its way; the bucket stores it under the old
// name after the call returned, and the mount is killed with SIGKILL
// before the answer comes back (the proxy holds it), so it never takes
// that object down itself. The next mount on the same cache must: the
// deleted file does not come back, and the renamed one is in the bucket
// under its new name only. Before, the delete took the upload out of the
// journal at once and the object stayed in the bucket for good; the
// rename journaled the new name only, and the old one stayed beside it.
func TestOvertakenInFlightThenKill9(t *testing.T) {
	requireFUSE(t)
	for _, how := range []string{"delete", "rename"} {
		t.Run(how, func(t *testing.T) {
			servers(t, func(t *testing.T, srv server) { overtakenThenKill9(t, srv, how) })
		})
	}
}

func overtakenThenKill9(t *testing.T, srv server, how string) {
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	p, proxyURL := newLateUploadProxy(t, srv.flags()[1], 4*time.Second)
	cacheDir := t.TempDir()
	// The same endpoint (the proxy) for both mounts: the journal's uploads
	// are the source's, which the endpoint is part of.
	flags := endpointOf(proxyURL)
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, append(flags, "--upload", "async", "--upload-delay", "0")...)
	data := []byte("weights of checkpoint 7, " + how)
	old, renamed := "checkpoint-7/model.bin", "checkpoint-7/model.final.bin"
	if err := os.MkdirAll(filepath.Join(m.dir, "checkpoint-7"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.armTo("", "late")
	if err := os.WriteFile(filepath.Join(m.dir, old), data, 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitSent(t)
	var err error
	if how == "delete" {
		err = os.Remove(filepath.Join(m.dir, old))
	} else {
		err = os.Rename(filepath.Join(m.dir, old), filepath.Join(m.dir, renamed))
	}
	if err != nil {
		t.Fatal(err)
	}
	p.waitDone(t) // in the bucket under the old name; the answer is held 4 s more
	m.kill9()
	if _, _, err := bucketSHA(t, w, old); err != nil {
		t.Fatalf("the held upload is not in the bucket at the kill: %v", err)
	}

	m = startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
	if how == "rename" {
		runSync(t, m)
		if got, err := os.ReadFile(filepath.Join(m.dir, renamed)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("the renamed file through the next mount: %q, %v", got, err)
		}
		if h, _, err := bucketSHA(t, w, renamed); err != nil || h != sha(data) {
			t.Errorf("the renamed file in the bucket: %v (its bytes: %v)", err, h == sha(data))
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, _, err := bucketSHA(t, w, old)
		if errors.Is(err, backend.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old name is still in the bucket 20 s after the next mount (%v)", err)
		}
	}
	if _, err := os.Stat(filepath.Join(m.dir, old)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old name through the next mount: %v", err)
	}
}
