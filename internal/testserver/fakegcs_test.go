package testserver

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fakeGCSPut uploads a small object through the JSON API (simple upload).
func fakeGCSPut(t *testing.T, f *FakeGCS, bucket, name, data string) {
	t.Helper()
	u := f.Endpoint + "/upload/storage/v1/b/" + bucket + "/o?uploadType=media&name=" + url.QueryEscape(name)
	resp, err := http.Post(u, "application/octet-stream", strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload %s/%s: %s: %s", bucket, name, resp.Status, b)
	}
}

// fakeGCSGet downloads an object through the XML API path on the public
// host, as the Go client does; it returns the status and body.
func fakeGCSGet(t *testing.T, f *FakeGCS, bucket, name string) (int, string) {
	t.Helper()
	resp, err := http.Get(f.Endpoint + "/" + bucket + "/" + url.PathEscape(name))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFakeGCSLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	f := StartFakeGCS(t)
	if got := f.Env(); len(got) != 1 || got[0] != "STORAGE_EMULATOR_HOST="+f.Addr {
		t.Fatalf("Env() = %q", got)
	}
	if !strings.HasPrefix(f.Endpoint, "http://127.0.0.1:") || !strings.HasSuffix(f.Endpoint, f.Addr) {
		t.Fatalf("Endpoint %q / Addr %q are not 127.0.0.1", f.Endpoint, f.Addr)
	}
	bucket := f.NewBucket(t)
	if err := f.MakeBucket(bucket, false); err == nil {
		t.Fatalf("creating %s twice succeeded: MakeBucket does not report failures", bucket)
	}
	fakeGCSPut(t, f, bucket, "dir/obj", "hello")
	// XML API downloads only route when -public-host is this address.
	if code, body := fakeGCSGet(t, f, bucket, "dir/obj"); code != 200 || body != "hello" {
		t.Fatalf("download: %d %q", code, body)
	}

	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if f.Running() {
		t.Fatal("Running after Stop")
	}
	if err := WaitHTTP(f.Endpoint+"/_internal/healthcheck", 200*time.Millisecond); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if err := f.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	if code, body := fakeGCSGet(t, f, bucket, "dir/obj"); code != 200 || body != "hello" {
		t.Fatalf("download after Restart: %d %q; the data should survive", code, body)
	}
}

func TestFakeGCSMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	f := StartFakeGCSWith(t, FakeGCSOptions{Memory: true})
	f.CreateVersionedBucket(t, "versioned")
	fakeGCSPut(t, f, "versioned", "k", "one")
	// The memory backend holds a key and a prefix of the same name.
	fakeGCSPut(t, f, "versioned", "k/child", "two")
	if code, body := fakeGCSGet(t, f, "versioned", "k"); code != 200 || body != "one" {
		t.Fatalf("download: %d %q", code, body)
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	if code, _ := fakeGCSGet(t, f, "versioned", "k"); code != http.StatusNotFound {
		t.Fatalf("memory backend after Restart: status %d, want 404 (documented as empty)", code)
	}
}

// A port taken by someone else makes start-up fail fast with the log,
// instead of waiting for the health check timeout.
func TestFakeGCSPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	first := StartFakeGCS(t)
	f := &FakeGCS{
		Endpoint: first.Endpoint,
		Addr:     first.Addr,
		Port:     first.Port,
		DataDir:  t.TempDir(),
		bin:      Binary(t, "fake-gcs-server"),
		logPath:  t.TempDir() + "/log",
	}
	start := time.Now()
	err := f.start()
	if err == nil {
		_ = f.Stop() // the test fails either way
		t.Fatal("a second server on a taken port started")
	}
	if d := time.Since(start); d > fakeGCSStartTimeout/2 {
		t.Fatalf("failure took %v", d)
	}
	if f.Running() {
		t.Fatal("Running after a failed start")
	}
}
