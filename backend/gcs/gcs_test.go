package gcs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/testserver"
)

func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := startFake(t, "bkt")
	ctx := context.Background()
	if err := newTestBackend(t, f.Endpoint, "bkt", nil).Check(ctx); err != nil {
		t.Fatalf("Check of an existing empty bucket: %v", err)
	}
	err := newTestBackend(t, f.Endpoint, "no-such-bucket", nil).Check(ctx)
	if !errors.Is(err, backend.ErrNoBucket) || !strings.Contains(err.Error(), "gs://no-such-bucket@") {
		t.Fatalf("Check of a missing bucket: %v; want ErrNoBucket naming the bucket", err)
	}
	_, err = newTestBackend(t, f.Endpoint, "no-such-bucket", nil).List(ctx, "", backend.ListOptions{})
	if !errors.Is(err, backend.ErrNoBucket) {
		t.Fatalf("List of a missing bucket: %v; want ErrNoBucket", err)
	}
	b := newTestBackend(t, f.Endpoint, "bkt", fastRetries)
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Check with the server down: %v; want ErrUnavailable", err)
	}
}

// With the filesystem backend, fake-gcs-server keeps objects and their
// generations across a restart on the same port: a client carries on.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := testserver.StartFakeGCS(t)
	f.CreateBucket(t, "bkt")
	b := newTestBackend(t, f.Endpoint, "bkt", fastRetries)
	ctx := context.Background()
	data := testData(5000, 1)
	info := mustPut(t, b, "dir/k", data, backend.PutOptions{})
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "dir/k"); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Stat with the server down: %v; want ErrUnavailable", err)
	}
	if _, err := readAll(ctx, b, "dir/k", info.Version, 0, 10); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("ReadRange with the server down: %v; want ErrUnavailable", err)
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	st, err := b.Stat(ctx, "dir/k")
	if err != nil || st.Version != info.Version {
		t.Fatalf("Stat after restart: %+v, %v; want version %s", st, err, info.Version)
	}
	if got, err := readAll(ctx, b, "dir/k", info.Version, 0, int64(len(data))); err != nil || string(got) != string(data) {
		t.Fatalf("read after restart: %d bytes, %v", len(got), err)
	}
}

// STORAGE_EMULATOR_HOST alone (no Endpoint) reaches the emulator, for
// reads, listings and resumable uploads, and shows in String.
func TestEmulatorHostEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := startFake(t, "bkt")
	for _, kv := range f.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b, err := New(context.Background(), "bkt", DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if want := "gs://bkt@http://" + f.Addr; b.String() != want {
		t.Errorf("String() = %q, want %q", b.String(), want)
	}
	data := testData(3*chunkQuantum, 2)
	info := mustPut(t, b, "a/b", data, backend.PutOptions{PartSize: chunkQuantum})
	got, err := readAll(context.Background(), b, "a/b", info.Version, 1, int64(len(data))-1)
	if err != nil || string(got) != string(data[1:]) {
		t.Fatalf("read through STORAGE_EMULATOR_HOST: %d bytes, %v", len(got), err)
	}
	if err := b.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// writeKeyFile writes a service-account key whose token endpoint is
// tokenURL.
func writeKeyFile(t *testing.T, tokenURL string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa := map[string]string{
		"type":           "service_account",
		"project_id":     "strata-test",
		"private_key_id": "k1",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "reader@strata-test.iam.gserviceaccount.com",
		"client_id":      "1",
		"token_uri":      tokenURL,
	}
	b, _ := json.Marshal(sa)
	p := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A key file whose token exchange is refused makes Check fail with
// ErrAccessDenied (not ErrUnavailable, and without retrying).
func TestKeyFileRefused(t *testing.T) {
	var hits atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)) // the client sees a short body
	}))
	defer tokens.Close()
	o := DefaultOptions()
	fastRetries(&o)
	o.KeyFile = writeKeyFile(t, tokens.URL+"/token")
	o.Endpoint = "https://127.0.0.1:1/" // never reached: no token, no request
	b, err := New(context.Background(), "bkt", o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Check(context.Background())
	if !errors.Is(err, backend.ErrAccessDenied) {
		t.Fatalf("Check with refused credentials: %v; want ErrAccessDenied", err)
	}
	if hits.Load() == 0 {
		t.Fatal("the key file's token endpoint was never asked")
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatal("error leaks the key")
	}
}

// Credentials never travel to a plain-http endpoint.
func TestNoCredentialsOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := startFake(t, "bkt")
	var hits atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer tokens.Close()
	b := newTestBackend(t, f.Endpoint, "bkt", func(o *Options) { o.KeyFile = writeKeyFile(t, tokens.URL+"/token") })
	if err := b.Check(context.Background()); err != nil {
		t.Fatalf("Check against an http emulator with a key file: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("a token was fetched for a plain-http endpoint")
	}
}

func TestNewRejects(t *testing.T) {
	ctx := context.Background()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"type":"something_else"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		bucket string
		edit   func(*Options)
		want   string
	}{
		{"EmptyBucket", "", nil, "empty bucket"},
		{"ZeroAttempts", "b", func(o *Options) { o.MaxAttempts = 0 }, "MaxAttempts"},
		{"NoStallTimeout", "b", func(o *Options) { o.StallTimeout = 0 }, "StallTimeout"},
		{"BackoffOrder", "b", func(o *Options) { o.MaxBackoff = time.Millisecond }, "MaxBackoff"},
		{"KeyAndAnonymous", "b", func(o *Options) { o.KeyFile, o.Anonymous = bad, true }, "exclusive"},
		{"EndpointScheme", "b", func(o *Options) { o.Endpoint = "ftp://x" }, "scheme"},
		{"MissingKeyFile", "b", func(o *Options) { o.KeyFile = "/nonexistent/key.json" }, "key file"},
		{"UnknownKeyType", "b", func(o *Options) { o.KeyFile = bad }, "unknown credentials type"},
	}
	for _, c := range cases {
		o := DefaultOptions()
		o.Anonymous = true
		if c.edit != nil {
			c.edit(&o)
			if o.KeyFile != "" && c.name != "KeyAndAnonymous" {
				o.Anonymous = false
			}
		}
		_, err := New(ctx, c.bucket, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestString(t *testing.T) {
	t.Setenv(emulatorEnv, "")
	ctx := context.Background()
	for _, c := range []struct{ endpoint, want string }{
		{"", "gs://bkt"},
		{"http://127.0.0.1:4443", "gs://bkt@http://127.0.0.1:4443"},
		{"https://user:secret@storage.example.com/storage/v1/?key=abc", "gs://bkt@https://storage.example.com"},
	} {
		o := DefaultOptions()
		o.Anonymous = true
		o.Endpoint = c.endpoint
		b, err := New(ctx, "bkt", o)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != c.want {
			t.Errorf("Endpoint %q: String() = %q, want %q", c.endpoint, got, c.want)
		}
		b.Close()
	}
}

// fake-gcs-server started as its README shows (no -public-host) serves
// the XML API only for storage.googleapis.com: an emulator or a custom
// endpoint is read through the JSON API, so reads work either way.
func TestEmulatorWithoutPublicHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := testserver.StartFakeGCSWith(t, testserver.FakeGCSOptions{Memory: true, NoPublicHost: true})
	f.CreateBucket(t, "bkt")
	ctx := context.Background()
	data := testData(3*chunkQuantum+7, 9)
	info := mustPut(t, newTestBackend(t, f.Endpoint, "bkt", nil), "dir/a b", data, backend.PutOptions{PartSize: chunkQuantum})
	check := func(name string, b *Backend) {
		t.Helper()
		for _, r := range []struct {
			version string
			off, n  int64
		}{{info.Version, 0, int64(len(data))}, {"", 5, 100}} {
			got, err := readAll(ctx, b, "dir/a b", r.version, r.off, r.n)
			if err != nil || !bytes.Equal(got, data[r.off:r.off+r.n]) {
				t.Errorf("%s: ReadRange(%q, %d, %d) = %d bytes, %v", name, r.version, r.off, r.n, len(got), err)
			}
		}
	}
	check("Endpoint", newTestBackend(t, f.Endpoint, "bkt", nil))
	for _, kv := range f.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b, err := New(ctx, "bkt", DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check("STORAGE_EMULATOR_HOST", b)
}
