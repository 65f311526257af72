package testserver

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMinIOLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	m := StartMinIO(t)
	live := m.Endpoint + "/minio/health/live"
	if err := WaitHTTP(live, time.Second); err != nil {
		t.Fatalf("not live after start: %v", err)
	}

	bucket := m.NewBucket(t)
	if err := m.MakeBucket(bucket); err == nil {
		t.Fatalf("creating %s twice succeeded; the signed request is not reaching MinIO's bucket API", bucket)
	}

	// A wrong secret must be refused: proves the signature is checked and
	// that MakeBucket reports failures.
	bad := &MinIO{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: "wrong-secret", Region: m.Region}
	if err := bad.MakeBucket("strata-badsig"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("MakeBucket with a wrong secret: got %v, want a 403 error", err)
	}

	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if resp, err := (&http.Client{Timeout: time.Second}).Get(live); err == nil {
		resp.Body.Close()
		t.Fatalf("server still answers after Stop: %s", resp.Status)
	}
	if err := m.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	// Same data directory: the bucket survived the restart.
	if err := m.MakeBucket(bucket); err == nil {
		t.Fatalf("bucket %s missing after Restart", bucket)
	}
	if err := m.MakeBucket("strata-after-restart"); err != nil {
		t.Fatalf("create bucket after restart: %v", err)
	}
}

func TestMinIOEnv(t *testing.T) {
	m := &MinIO{Endpoint: "http://127.0.0.1:1", AccessKey: "ak", SecretKey: "sk", Region: "r"}
	got := map[string]string{}
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for k, want := range map[string]string{
		"AWS_ACCESS_KEY_ID":     "ak",
		"AWS_SECRET_ACCESS_KEY": "sk",
		"AWS_REGION":            "r",
		"AWS_ENDPOINT_URL":      "http://127.0.0.1:1",
	} {
		if got[k] != want {
			t.Errorf("Env %s = %q, want %q", k, got[k], want)
		}
	}
}
