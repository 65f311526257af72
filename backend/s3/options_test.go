package s3

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

func TestDefaultOptionsFill(t *testing.T) {
	var o Options
	o.fill()
	if d := DefaultOptions(); o != d {
		t.Fatalf("zero Options filled to %+v, want DefaultOptions %+v", o, d)
	}
	o = Options{ReadResumes: -1, CopyMultipartThreshold: 50 << 30, MaxAttempts: 3}
	o.fill()
	if o.ReadResumes != 0 || o.CopyMultipartThreshold != maxSinglePut || o.MaxAttempts != 3 {
		t.Fatalf("fill: %+v", o)
	}
	if d := DefaultOptions(); d.MaxConns < 128 || d.MaxAttempts < 5 || d.MaxBackoff > time.Minute {
		t.Fatalf("defaults not sized for 128 concurrent GETs with bounded retries: %+v", d)
	}
}

func TestPartSizeFor(t *testing.T) {
	const MiB, GiB, TiB = int64(1 << 20), int64(1 << 30), int64(1 << 40)
	cases := []struct{ size, want, expect int64 }{
		{0, 0, 5 * MiB},
		{100 * MiB, 1 * MiB, 5 * MiB},
		{100 * MiB, 16 * MiB, 16 * MiB},
		{TiB, 16 * MiB, 105 * MiB},
		{5 * TiB, 16 * MiB, 525 * MiB},
		{100 * TiB, 16 * MiB, 5 * GiB},
	}
	for _, c := range cases {
		got := partSizeFor(c.size, c.want)
		if got != c.expect {
			t.Errorf("partSizeFor(%d, %d) = %d, want %d", c.size, c.want, got, c.expect)
		}
		if c.size <= 5*TiB && (c.size+got-1)/got > maxParts {
			t.Errorf("partSizeFor(%d) = %d needs %d parts", c.size, got, (c.size+got-1)/got)
		}
	}
}

func TestStringAndValidation(t *testing.T) {
	ctx := context.Background()
	cases := []struct{ endpoint, want string }{
		{"", "s3://data"},
		{"http://127.0.0.1:9000", "s3://data@127.0.0.1:9000"},
		{"https://user:secret@minio.local:9000/", "s3://data@minio.local:9000"},
		{"https://gw.example.com/s3", "s3://data@gw.example.com/s3"},
	}
	for _, c := range cases {
		b, err := New(ctx, "data", Options{Endpoint: c.endpoint, Region: "us-east-1",
			AccessKeyID: "AKIDSECRETISH", SecretAccessKey: "verysecret"})
		if err != nil {
			t.Fatalf("New(%q): %v", c.endpoint, err)
		}
		if got := b.String(); got != c.want {
			t.Errorf("String() with endpoint %q = %q, want %q", c.endpoint, got, c.want)
		}
		if s := b.String(); strings.Contains(s, "secret") || strings.Contains(s, "AKID") {
			t.Errorf("String() leaks credentials: %q", s)
		}
	}
	for _, bucket := range []string{"", "a/b", "a b"} {
		if _, err := New(ctx, bucket, Options{}); err == nil {
			t.Errorf("New(%q) accepted an invalid bucket", bucket)
		}
	}
	if _, err := New(ctx, "b", Options{Endpoint: "minio:9000"}); err == nil {
		t.Error("New accepted an endpoint without a scheme")
	}
}

func TestRegionDefault(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	b, err := New(context.Background(), "b", Options{NoSignRequest: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := b.client.Options().Region; r != "us-east-1" {
		t.Errorf("region without configuration = %q, want us-east-1", r)
	}
	t.Setenv("AWS_REGION", "eu-west-3")
	b, _ = New(context.Background(), "b", Options{NoSignRequest: true})
	if r := b.client.Options().Region; r != "eu-west-3" {
		t.Errorf("region from AWS_REGION = %q", r)
	}
	b, _ = New(context.Background(), "b", Options{NoSignRequest: true, Region: "ap-south-1"})
	if r := b.client.Options().Region; r != "ap-south-1" {
		t.Errorf("explicit region = %q", r)
	}
}

// TestCABundle checks that AWS_CA_BUNDLE is honoured: New must not fail
// with it set (a plain *http.Client would), and a server whose
// certificate is only in the bundle must be trusted.
func TestCABundle(t *testing.T) {
	f := &fakeS3{data: []byte("tls"), etag: "e", stop: make(chan struct{})}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(func() { close(f.stop); srv.Close() })
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(bundle, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	stat := func() error {
		b, err := New(context.Background(), "bucket", Options{Endpoint: srv.URL, Region: "us-east-1",
			ForcePathStyle: true, AccessKeyID: "ak", SecretAccessKey: "sk", MaxAttempts: 1})
		if err != nil {
			return err
		}
		defer b.Close()
		_, err = b.Stat(context.Background(), "obj")
		return err
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	if err := stat(); err != nil {
		t.Fatalf("with the server's certificate in AWS_CA_BUNDLE: %v", err)
	}
	if sys := "/etc/ssl/certs/ca-certificates.crt"; fileExists(sys) {
		t.Setenv("AWS_CA_BUNDLE", sys)
		err := stat()
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("with the system bundle the test server must be untrusted, got %v", err)
		}
	}
	t.Setenv("AWS_CA_BUNDLE", filepath.Join(t.TempDir(), "missing.pem"))
	if _, err := New(context.Background(), "bucket", Options{Region: "us-east-1"}); err == nil {
		t.Fatal("New with a missing AWS_CA_BUNDLE file succeeded")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestCheckMissingCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	b, err := New(context.Background(), "bucket", Options{Endpoint: "http://127.0.0.1:1", Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(context.Background())
	if !errors.Is(err, backend.ErrAccessDenied) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("Check without credentials: %v", err)
	}
}

func TestProfileAndTransport(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config")
	if err := os.WriteFile(cfgFile, []byte("[profile strata]\nregion = eu-north-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfgFile)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	b, err := New(context.Background(), "b", Options{Profile: "strata", NoSignRequest: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := b.client.Options().Region; r != "eu-north-1" {
		t.Errorf("region from profile = %q, want eu-north-1", r)
	}
	if _, err := New(context.Background(), "b", Options{Profile: "no-such-profile"}); err == nil {
		t.Error("New with a missing profile succeeded")
	}
	tr := b.transport
	if tr.MaxIdleConnsPerHost < 128 || tr.MaxConnsPerHost != 0 || tr.TLSNextProto == nil || !tr.DisableCompression {
		t.Errorf("transport not tuned for many concurrent GETs: idle/host %d, max/host %d, h2 off %v",
			tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost, tr.TLSNextProto != nil)
	}
	if b.client.Options().HTTPClient == nil {
		t.Fatal("no HTTP client")
	}
}
