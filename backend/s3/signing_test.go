package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// uploadRecorder takes uploads (a PUT, a multipart upload's begin and
// parts) and records the x-amz-content-sha256 each body was signed with.
type uploadRecorder struct {
	mu     sync.Mutex
	hashes []string
}

func (u *uploadRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	w.Header().Set("Last-Modified", time.Unix(1700000000, 0).UTC().Format(http.TimeFormat))
	switch {
	case r.Method == http.MethodPut:
		u.mu.Lock()
		u.hashes = append(u.hashes, r.Header.Get("X-Amz-Content-Sha256"))
		u.mu.Unlock()
	case r.Method == http.MethodPost && r.URL.Query().Has("uploads"):
		fmt.Fprint(w, `<InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
	case r.Method == http.MethodHead:
		w.Header().Set("Content-Length", "5")
	}
}

func (u *uploadRecorder) signed() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.hashes...)
}

// recorderBackend serves an uploadRecorder over TLS (the CA given to the
// client through AWS_CA_BUNDLE, as a user would) or plain HTTP.
func recorderBackend(t *testing.T, overTLS bool) (*uploadRecorder, *Backend) {
	t.Helper()
	rec := &uploadRecorder{}
	var srv *httptest.Server
	if overTLS {
		srv = httptest.NewTLSServer(rec)
		ca := filepath.Join(t.TempDir(), "ca.pem")
		block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := os.WriteFile(ca, block, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_CA_BUNDLE", ca)
	} else {
		srv = httptest.NewServer(rec)
	}
	t.Cleanup(srv.Close)
	return rec, backendAt(t, srv.URL)
}

// An upload's body over HTTPS is signed as UNSIGNED-PAYLOAD (TLS protects
// it), and over plain HTTP with its SHA-256, its only protection there.
// The SDK decides this (Strata leaves optional checksums off); the README's
// tuning section rests on it: hashing every part took a third of the
// daemon's CPU while a checkpoint went up to an http:// endpoint.
func TestUploadsAreUnsignedOnlyOverTLS(t *testing.T) {
	body := []byte("hello")
	sum := sha256.Sum256(body)
	for _, overTLS := range []bool{true, false} {
		t.Run(fmt.Sprintf("tls=%v", overTLS), func(t *testing.T) {
			rec, b := recorderBackend(t, overTLS)
			ctx := context.Background()
			if _, err := b.Put(ctx, "k", strings.NewReader(string(body)), int64(len(body)), backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			up, err := b.BeginParts(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := up.SendPart(ctx, 1, strings.NewReader(string(body)), 0, int64(len(body))); err != nil {
				t.Fatal(err)
			}
			want := hex.EncodeToString(sum[:])
			if overTLS {
				want = "UNSIGNED-PAYLOAD"
			}
			got := rec.signed()
			if len(got) != 2 || got[0] != want || got[1] != want {
				t.Fatalf("x-amz-content-sha256 of the PUT and the part: %q, want %q", got, want)
			}
		})
	}
}
