package shared

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/s3"
	"github.com/stratafs/strata/internal/testserver"
)

func startMinIO(tb testing.TB) *testserver.MinIO {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts MinIO")
	}
	return testserver.StartMinIO(tb)
}

func minioTier(tb testing.TB, m *testserver.MinIO, bucket string, timeout time.Duration) *s3.Backend {
	tb.Helper()
	st, err := NewS3(context.Background(), bucket, S3Options{Endpoint: m.Endpoint, Region: m.Region, ForcePathStyle: true,
		AccessKeyID: m.AccessKey, SecretAccessKey: m.SecretKey, Timeout: timeout})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

func minioOrigin(tb testing.TB, m *testserver.MinIO, files map[string][]byte) (*s3.Backend, map[string]string) {
	tb.Helper()
	o := s3.DefaultOptions()
	o.Endpoint, o.Region, o.ForcePathStyle = m.Endpoint, m.Region, true
	o.AccessKeyID, o.SecretAccessKey = m.AccessKey, m.SecretKey
	be, err := s3.New(context.Background(), m.NewBucket(tb), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { be.Close() })
	vers := map[string]string{}
	for k, v := range files {
		info, err := be.Put(context.Background(), k, bytes.NewReader(v), int64(len(v)), backend.PutOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		vers[k] = info.Version
	}
	return be, vers
}

// TestMinIOTier runs the tier on a real S3 server: the mount check, a
// second node served by the tier, a truncated entry (a real 416), and the
// tier's server going away.
func TestMinIOTier(t *testing.T) {
	mo, m := startMinIO(t), startMinIO(t) // origin, tier
	ctx := context.Background()
	data := payload(20, 5*bs+17)
	org, vers := minioOrigin(t, mo, map[string][]byte{"a/x": data})
	tierBucket := m.NewBucket(t)
	o := testOptions()
	o.Prefix = "team/"
	o.Timeout = 2 * time.Second

	if err := Check(ctx, minioTier(t, m, "no-such-bucket-here", time.Second), "", false); !errors.Is(err, backend.ErrNoBucket) {
		t.Fatalf("Check on a missing bucket: %v", err)
	}
	if err := Check(ctx, minioTier(t, m, tierBucket, time.Second), o.Prefix, true); err != nil {
		t.Fatalf("read-only Check before any marker: %v", err)
	}
	store := minioTier(t, m, tierBucket, o.Timeout)
	if err := Check(ctx, store, o.Prefix, false); err != nil {
		t.Fatalf("Check: %v", err)
	}

	a := newTier(t, org, store, o)
	if got := readObject(t, a.Backend(), "a/x", vers["a/x"], int64(len(data)), 2); !bytes.Equal(got, data) {
		t.Fatal("node A: wrong bytes")
	}
	a.Close()
	if s := a.Stats().Snapshot(); s.Writes != 6 || s.WriteErrors != 0 {
		t.Fatalf("node A: %+v", s)
	}

	b := newTier(t, org, minioTier(t, m, tierBucket, o.Timeout), o)
	if got := readObject(t, b.Backend(), "a/x", vers["a/x"], int64(len(data)), 2); !bytes.Equal(got, data) {
		t.Fatal("node B: wrong bytes")
	}
	if s := b.Stats().Snapshot(); s.Origin.Requests != 0 || s.HitBlocks != 6 {
		t.Fatalf("node B: %+v", s)
	}

	// Truncate the last group's object: the server answers the ranged GET
	// with 416, which is a bad entry, not a tier failure.
	id := Identity(org.String(), "a/x", vers["a/x"])
	last := a.Keys().Object(id, 5)
	if _, err := store.Put(ctx, last, bytes.NewReader([]byte("short")), 5, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c := newTier(t, org, minioTier(t, m, tierBucket, o.Timeout), o)
	if got := readObject(t, c.Backend(), "a/x", vers["a/x"], int64(len(data)), 6); !bytes.Equal(got, data) {
		t.Fatal("node C: wrong bytes")
	}
	if s := c.Stats().Snapshot(); s.BadEntries != 1 || s.Shared.Errors != 0 || s.MissBlocks != 1 || s.HitBlocks != 5 {
		t.Fatalf("node C: %+v", s)
	}

	// The tier's server goes away: the mount check says unreachable, and
	// reads still succeed, promptly, from the origin.
	d := newTier(t, org, minioTier(t, m, tierBucket, o.Timeout), o)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, minioTier(t, m, tierBucket, 500*time.Millisecond), o.Prefix, false); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Check with the server down: %v", err)
	}
	start := time.Now()
	for range 3 {
		if got := readObject(t, d.Backend(), "a/x", vers["a/x"], int64(len(data)), 6); !bytes.Equal(got, data) {
			t.Fatal("tier down: wrong bytes")
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("three reads with the tier down took %s", el)
	}
	if s := d.Stats().Snapshot(); !s.BreakerOpen || s.HitBlocks != 0 || s.Origin.Bytes != 3*int64(len(data)) {
		t.Fatalf("tier down: %+v", s)
	}
}
