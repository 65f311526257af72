package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// upload is what `strata uploads --json` prints per entry.
type upload struct {
	Key      string `json:"key"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
	Copy     string `json:"copy"`
}

func listUploads(t *testing.T, m *mount) []upload {
	t.Helper()
	out, err := exec.Command(binPath(t), "uploads", "--json", m.dir).Output()
	if err != nil {
		t.Fatalf("strata uploads: %v\n%s", err, out)
	}
	var us []upload
	if err := json.Unmarshal(out, &us); err != nil {
		t.Fatalf("strata uploads: %v\n%s", err, out)
	}
	return us
}

// waitUpload polls the listing until key's entry satisfies ok.
func waitUpload(t *testing.T, m *mount, key string, ok func(upload) bool) upload {
	t.Helper()
	var last []upload
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = listUploads(t, m)
		for _, u := range last {
			if u.Key == key && ok(u) {
				return u
			}
		}
	}
	t.Fatalf("%s: never in the expected state; last listing %+v", key, last)
	return upload{}
}

// syncedBuffer is a bytes.Buffer safe to read while a command writes it.
type syncedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUploadsListRetryDiscard: with the bucket down, an async upload is
// listed as retrying with its error; `strata sync` says it waits for it;
// once the bucket is back `strata uploads --retry` sends it now and sync
// ends. A second one is discarded: it never reaches the bucket, the file
// reads as the bucket's version again, and its bytes are kept under
// failed-writes.
func TestUploadsListRetryDiscard(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
	if us := listUploads(t, m); len(us) != 0 {
		t.Fatalf("uploads listed on a fresh mount: %+v", us)
	}
	// Both files exist first: with the bucket down a lookup of a name
	// the mount has not listed yet fails.
	a0, b0 := []byte("a, first version"), []byte("b, first version")
	put(t, w, map[string][]byte{"a.bin": a0, "b.bin": b0})
	for _, n := range []string{"a.bin", "b.bin"} {
		if _, err := os.ReadFile(filepath.Join(m.dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	srv.stop(t)
	a, b := randData(600, 3<<20), randData(601, 1<<20)
	if _, err := writeFile(filepath.Join(m.dir, "a.bin"), a); err != nil {
		t.Fatal(err)
	}
	u := waitUpload(t, m, "a.bin", func(u upload) bool { return u.State == "retrying" })
	if u.Error == "" || u.Attempts == 0 {
		t.Fatalf("a retrying upload without its error: %+v", u)
	}

	// sync says what it waits for.
	var stderr syncedBuffer
	syncCmd := exec.Command(binPath(t), "sync", "--progress-every", "200ms", m.dir)
	syncCmd.Stderr = &stderr
	if err := syncCmd.Start(); err != nil {
		t.Fatal(err)
	}
	syncDone := make(chan error, 1)
	go func() { syncDone <- syncCmd.Wait() }()
	t.Cleanup(func() { _ = syncCmd.Process.Kill() }) // it may have exited
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "a.bin (retrying"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("strata sync did not say it waits for a.bin; it said:\n%s", stderr.String())
		}
	}

	// Discard b while the bucket is down.
	if _, err := writeFile(filepath.Join(m.dir, "b.bin"), b); err != nil {
		t.Fatal(err)
	}
	waitUpload(t, m, "b.bin", func(u upload) bool { return u.State == "retrying" || u.State == "pending" || u.State == "uploading" })
	out, err := exec.Command(binPath(t), "uploads", "--discard", m.dir, "b.bin").CombinedOutput()
	if err != nil {
		t.Fatalf("strata uploads --discard: %v\n%s", err, out)
	}
	kept, err := filepath.Glob(filepath.Join(cacheDir, "failed-writes", "*"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("failed-writes holds %v (%v); --discard said:\n%s", kept, err, out)
	}
	if got, _ := os.ReadFile(kept[0]); !bytes.Equal(got, b) {
		t.Fatal("the discarded bytes kept under failed-writes differ from what was written")
	}
	if !strings.Contains(string(out), kept[0]) {
		t.Fatalf("--discard did not say where the bytes are (%s):\n%s", kept[0], out)
	}
	for _, u := range listUploads(t, m) {
		if u.Key == "b.bin" {
			t.Fatalf("b.bin still listed after --discard: %+v", u)
		}
	}
	if got, err := os.ReadFile(filepath.Join(m.dir, "b.bin")); err != nil || !bytes.Equal(got, b0) {
		t.Fatalf("after --discard b.bin reads %d bytes (%v), want its bucket version back", len(got), err)
	}

	// The bucket is back: retry now.
	srv.restart(t)
	if out, err := exec.Command(binPath(t), "uploads", "--retry", m.dir, "a.bin").CombinedOutput(); err != nil {
		t.Fatalf("strata uploads --retry: %v\n%s", err, out)
	}
	select {
	case err := <-syncDone:
		if err != nil {
			t.Fatalf("strata sync: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("strata sync still waiting after the retry:\n%s", stderr.String())
	}
	if got, _, err := bucketSHA(t, w, "a.bin"); err != nil || got != sha(a) {
		t.Fatalf("a.bin not whole in the bucket: %v", err)
	}
	if got, _, err := bucketSHA(t, w, "b.bin"); err != nil || got != sha(b0) {
		t.Fatalf("the discarded b.bin reached the bucket: %v", err)
	}
	if us := listUploads(t, m); len(us) != 0 {
		t.Fatalf("uploads listed after sync: %+v", us)
	}
	// An upload that is done has nothing left to retry: that is success
	// (the bucket may come back and land it just before a script's
	// --retry), said as such; a path that names nothing is an error.
	out, err = exec.Command(binPath(t), "uploads", "--retry", m.dir, "a.bin").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "nothing to retry") {
		t.Fatalf("--retry of an upload that is done: %v\n%s", err, out)
	}
	if out, err := exec.Command(binPath(t), "uploads", "--retry", m.dir, "no-such.bin").CombinedOutput(); err == nil || !strings.Contains(string(out), "no-such.bin") {
		t.Fatalf("--retry of a path that names nothing: %v\n%s", err, out)
	}
}

// TestRetryLeavesAnOpenFileHeld: `strata uploads --retry` while a file is
// still open for writing, after one of its descriptors was closed (a
// forked child's copy), must not publish it half written. The retry let
// its held upload start: the bucket got the file as it stood (with
// --upload async the kernel writes the very file that upload reads), and
// the writes after it never went up, so the bucket kept the prefix.
func TestRetryLeavesAnOpenFileHeld(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--upload-delay", "0")
	for _, all := range []bool{true, false} {
		name := fmt.Sprintf("open-%v.bin", all)
		half, rest := randData(92, 1<<20), randData(93, 1<<20)
		whole := append(append([]byte(nil), half...), rest...)
		g := guardBucket(t, w, name, "", sha(whole))
		f, err := os.Create(filepath.Join(m.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(half); err != nil {
			t.Fatal(err)
		}
		child, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Close(child); err != nil {
			t.Fatalf("close of the child's copy: %v", err)
		}
		args := []string{"uploads", "--retry", m.dir}
		if !all {
			args = append(args, name)
		}
		if out, err := exec.Command(binPath(t), args...).CombinedOutput(); err != nil {
			t.Errorf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(500 * time.Millisecond) // an upload started now would land
		if us := listUploads(t, m); len(us) != 1 || us[0].Key != name || us[0].State != "held" {
			t.Errorf("retry of every upload %v: the uploads are %+v, want %s held until its last close", all, us, name)
		}
		if _, err := f.Write(rest); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		runSync(t, m)
		if got, n, err := bucketSHA(t, w, name); err != nil || got != sha(whole) {
			t.Errorf("retry of every upload %v: the bucket holds %d bytes (%v), want the whole file", all, n, err)
		}
		g.check()
	}
}

// TestADiscardTooLateSaysSo: `strata uploads --discard` of a rewrite
// whose upload the bucket has already taken, its answer still on the way
// (toxiproxy holds what MinIO sends back). The discard took it for a
// delete and removed the object: the bucket lost the file, old and new.
// The bucket keeps what landed, the file reads as it, the bytes are kept
// all the same, and the command says it came too late and exits 1.
func TestADiscardTooLateSaysSo(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	tp := startToxiproxy(t)
	addr := tp.proxy(t, "discard-late", srv.m.Addr)
	old, data := randData(94, 1<<20), randData(95, 1<<20)
	put(t, w, map[string][]byte{"a.bin": old})
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, append(endpointOf(addr), "--upload", "async", "--upload-delay", "0")...)
	p := filepath.Join(m.dir, "a.bin")
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	// Answers are held from now until the discard has begun; the
	// requests themselves go through.
	tp.toxic(t, "discard-late", "late", "latency", "downstream", 1, map[string]int64{"latency": 60000})
	if _, err := writeFile(p, data); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if h, _, err := bucketSHA(t, w, "a.bin"); err == nil && h == sha(data) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rewrite did not reach the bucket")
		}
	}
	var out syncedBuffer
	discard := exec.Command(binPath(t), "uploads", "--discard", m.dir, "a.bin")
	discard.Stdout, discard.Stderr = &out, &out
	if err := discard.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- discard.Wait() }()
	var kept []string
	for deadline := time.Now().Add(30 * time.Second); len(kept) == 0; time.Sleep(10 * time.Millisecond) {
		kept, _ = filepath.Glob(filepath.Join(cacheDir, "failed-writes", "*"))
		if time.Now().After(deadline) {
			t.Fatalf("the discard did not set the bytes aside; it said:\n%s", out.String())
		}
	}
	tp.removeToxic(t, "discard-late", "late")
	err := <-done
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out.String(), "discarded too late") {
		t.Errorf("--discard of an upload that had landed: %v\n%s", err, out.String())
	}
	if h, _, err := bucketSHA(t, w, "a.bin"); err != nil || h != sha(data) {
		t.Errorf("the bucket's a.bin after the discard: %v (what landed: %v, the old one: %v)", err, h == sha(data), h == sha(old))
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Errorf("a.bin reads %d bytes (%v); want what landed", len(got), err)
	}
	if len(kept) != 1 || !strings.Contains(out.String(), kept[0]) {
		t.Errorf("failed-writes holds %v; --discard said:\n%s", kept, out.String())
	}
}
