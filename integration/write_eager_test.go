package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSyncUploadOverlapsTheWrites: with --upload sync (the default) a
// large file's parts go to the bucket while it is being written, so its
// close waits for the last part only; nothing appears in the bucket
// before the close; and the object is exactly the closed file's bytes
// even when the writer goes back over parts already sent (a zip writer
// fixing a header) and truncates the tail.
func TestSyncUploadOverlapsTheWrites(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr)
	sent := func() float64 {
		return metric(scrape(t, addr), "strata_backend_bytes_total", map[string]string{"op": "put", "direction": "sent"})
	}

	data := randData(501, 96<<20+4321)
	p := filepath.Join(m.dir, "ckpt.pt")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := 0; off < 80<<20; off += 1 << 20 {
		if _, err := f.Write(data[off : off+1<<20]); err != nil {
			t.Fatal(err)
		}
	}
	// The file is open, 80 MiB written: its first parts go up now.
	deadline := time.Now().Add(time.Minute)
	for sent() < 32<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("after 80 MiB written and a minute, %v bytes sent; want the first parts (32 MiB) sent before close", sent())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, err := bucketSHA(t, w, "ckpt.pt"); err == nil {
		t.Fatal("the object is in the bucket before the file was closed")
	}
	// Back over a part already sent, then the rest, then a longer tail
	// cut off again.
	patch := randData(502, 4096)
	copy(data[17<<20:], patch)
	if _, err := f.WriteAt(patch, 17<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data[80<<20:], 80<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(randData(503, 8<<20), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, n, err := bucketSHA(t, w, "ckpt.pt")
	if err != nil || got != sha(data) || n != int64(len(data)) {
		t.Fatalf("the bucket holds %d bytes, sha %s (%v); want the %d bytes closed, sha %s", n, got, err, len(data), sha(data))
	}
	// Read back through the mount, the cached copy.
	readWhole(t, p, data)
}

// TestKill9MidWriteLeavesNoMultipartUpload: a mount killed while a large
// file's parts are going up (sync mode) leaves an incomplete multipart
// upload in the bucket; the next mount on the same cache dir aborts it,
// and the object never appears.
func TestKill9MidWriteLeavesNoMultipartUpload(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	addr := metricsAddr(t)
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--metrics-addr", addr)
	sent := func() float64 {
		return metric(scrape(t, addr), "strata_backend_bytes_total", map[string]string{"op": "put", "direction": "sent"})
	}
	f, err := os.Create(filepath.Join(m.dir, "killed.pt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := randData(504, 80<<20)
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := f.Write(data[off : off+1<<20]); err != nil {
			t.Fatal(err)
		}
	}
	// A part is sent only after its upload is recorded.
	for deadline := time.Now().Add(time.Minute); sent() < 16<<20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 80 MiB written and a minute, %v bytes sent; want a part", sent())
		}
	}
	m.kill9()
	open, err := srv.m.MultipartUploads(bucket)
	if err != nil || len(open) != 1 {
		t.Fatalf("after the kill: multipart uploads %q, %v; want the one of killed.pt", open, err)
	}
	startMount(t, srv, srv.source(bucket, ""), cacheDir)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if open, err = srv.m.MultipartUploads(bucket); err == nil && len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the restart: multipart uploads %q, %v; want none", open, err)
		}
	}
	if _, _, err := bucketSHA(t, w, "killed.pt"); err == nil {
		t.Fatal("the object of a file never closed is in the bucket")
	}
}
