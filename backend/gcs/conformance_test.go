package gcs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/backendtest"
	"github.com/stratafs/strata/internal/testserver"
)

// TestConformance runs the backend conformance suite against
// fake-gcs-server (in-memory backend: it models folder objects, a key
// that is also a prefix, and generations like GCS does), one fresh bucket
// per subtest.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := testserver.StartFakeGCSWith(t, testserver.FakeGCSOptions{Memory: true})
	var n atomic.Int64
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			name := fmt.Sprintf("conformance-%d", n.Add(1))
			f.CreateBucket(t, name)
			return newTestBackend(t, f.Endpoint, name, nil)
		},
		Caps: backendtest.Caps{
			LongKeys:      true, // names up to 1024 bytes
			NonPathKeys:   true, // any UTF-8 name but "." and ".."
			ControlKeys:   true,
			FolderObjects: true,
			KeyAndPrefix:  true,
		},
		PartSize: chunkQuantum, // the smallest resumable chunk
		Parallel: true,
	})
}

// newTestBackend opens bucket at endpoint; edit, if not nil, adjusts
// the options first.
func newTestBackend(t testing.TB, endpoint, bucket string, edit func(*Options)) *Backend {
	t.Helper()
	o := DefaultOptions()
	o.Endpoint = endpoint
	if edit != nil {
		edit(&o)
	}
	b, err := New(context.Background(), bucket, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// fastRetries makes failures quick to reach: few attempts, short waits.
func fastRetries(o *Options) {
	o.MaxAttempts = 3
	o.InitialBackoff = 5 * time.Millisecond
	o.MaxBackoff = 20 * time.Millisecond
	o.RetryDeadline = 5 * time.Second
	o.RequestTimeout = 2 * time.Second
	o.StallTimeout = 300 * time.Millisecond
}

// startFake starts an in-memory fake-gcs-server with one bucket.
func startFake(t *testing.T, bucket string) *testserver.FakeGCS {
	t.Helper()
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := testserver.StartFakeGCSWith(t, testserver.FakeGCSOptions{Memory: true})
	f.CreateBucket(t, bucket)
	return f
}

// mustPut uploads data as key and returns its info.
func mustPut(t *testing.T, b *Backend, key string, data []byte, opt backend.PutOptions) backend.ObjectInfo {
	t.Helper()
	info, err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), opt)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

// readAll reads a whole range.
func readAll(ctx context.Context, b *Backend, key, version string, off, n int64) ([]byte, error) {
	rc, err := b.ReadRange(ctx, key, version, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// testData returns n bytes that differ with seed.
func testData(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
