package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/backendtest"
	"github.com/stratafs/strata/internal/testserver"
)

// minioOptions returns options for the test server, with short timeouts so
// that failure paths are quick.
func minioOptions(m *testserver.MinIO) Options {
	o := DefaultOptions()
	o.Endpoint = m.Endpoint
	o.Region = m.Region
	o.ForcePathStyle = true
	o.AccessKeyID, o.SecretAccessKey = m.AccessKey, m.SecretKey
	return o
}

// newMinIOBackend returns a backend on a fresh bucket of m.
func newMinIOBackend(t testing.TB, m *testserver.MinIO, opt Options) *Backend {
	t.Helper()
	bucket := m.NewBucket(t)
	b, err := New(context.Background(), bucket, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func startMinIO(t *testing.T) *testserver.MinIO {
	t.Helper()
	if testing.Short() {
		t.Skip("starts MinIO")
	}
	return testserver.StartMinIO(t)
}

func TestConformanceMinIO(t *testing.T) {
	m := startMinIO(t)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend { return newMinIOBackend(t, m, minioOptions(m)) },
		Caps: backendtest.Caps{
			LongKeys:      true,
			ControlKeys:   true,
			FolderObjects: true,
			// MinIO stores "k" as a directory k/ holding xl.meta: an
			// object "k/child" is then hidden from listings.
			KeyAndPrefix: false,
		},
		Parallel: true,
	})
}

// MinIO-specific behaviour beyond the conformance suite.
func TestMinIOWrites(t *testing.T) {
	m := startMinIO(t)
	ctx := context.Background()
	data := payload(11<<20 + 123)

	t.Run("MultipartParts", func(t *testing.T) {
		b := newMinIOBackend(t, m, minioOptions(m))
		info, err := b.Put(ctx, "big", bytes.NewReader(data), int64(len(data)), backend.PutOptions{PartSize: 5 << 20, Concurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(info.Version, "-3") {
			t.Fatalf("version %q: want a 3-part multipart ETag", info.Version)
		}
		if info.MTime.IsZero() || time.Since(info.MTime) > time.Hour {
			t.Errorf("MTime %v", info.MTime)
		}
		checkNoUploads(t, b)
	})
	t.Run("CancelAbortsUpload", func(t *testing.T) {
		b := newMinIOBackend(t, m, minioOptions(m))
		c, cancel := context.WithCancel(ctx)
		r := &hookReader{data: data, at: 6 << 20, hook: cancel}
		_, err := b.Put(c, "big", r, int64(len(data)), backend.PutOptions{PartSize: 5 << 20, Concurrency: 1})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Put: %v", err)
		}
		checkNoUploads(t, b)
	})
	// The object changes while the parts are uploading: the preflight
	// check passed, so only the condition on CompleteMultipartUpload can
	// refuse the upload.
	for _, tc := range []struct {
		name   string
		exists bool
	}{{"IfMatchOnComplete", true}, {"IfNoneMatchOnComplete", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMinIOBackend(t, m, minioOptions(m))
			ifVersion := backend.VersionAbsent
			if tc.exists {
				v, err := b.Put(ctx, "k", strings.NewReader("v1"), 2, backend.PutOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ifVersion = v.Version
			}
			var other backend.ObjectInfo
			r := &hookReader{data: data, at: 1, hook: func() {
				var err error
				other, err = b.Put(ctx, "k", strings.NewReader("other writer"), 12, backend.PutOptions{})
				if err != nil {
					t.Error(err)
				}
			}}
			_, err := b.Put(ctx, "k", r, int64(len(data)), backend.PutOptions{PartSize: 5 << 20, Concurrency: 1, IfVersion: ifVersion})
			if !errors.Is(err, backend.ErrPreconditionFailed) {
				t.Fatalf("Put racing another writer: %v, want ErrPreconditionFailed", err)
			}
			if st, err := b.Stat(ctx, "k"); err != nil || st.Version != other.Version {
				t.Fatalf("object after the refused upload: %+v, %v; want the other writer's %s", st, err, other.Version)
			}
			checkNoUploads(t, b)
		})
	}
	t.Run("MultipartCopy", func(t *testing.T) {
		o := minioOptions(m)
		o.CopyMultipartThreshold, o.CopyPartSize = 5<<20, 5<<20
		b := newMinIOBackend(t, m, o)
		src, err := b.Put(ctx, "src", bytes.NewReader(data), int64(len(data)), backend.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info, err := b.Copy(ctx, "src", src.Version, "dst")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(info.Version, "-3") || info.Size != int64(len(data)) {
			t.Fatalf("multipart copy: %+v", info)
		}
		rc, err := b.ReadRange(ctx, "dst", info.Version, 0, info.Size)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("copied bytes differ (%d, %v)", len(got), err)
		}
		if _, err := b.Put(ctx, "src", strings.NewReader("new"), 3, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Copy(ctx, "src", src.Version, "dst2"); !errors.Is(err, backend.ErrVersionChanged) {
			t.Fatalf("copy pinned to a replaced version: %v", err)
		}
		checkNoUploads(t, b)
	})
}

func TestMinIOCheckAndOutage(t *testing.T) {
	m := startMinIO(t)
	ctx := context.Background()
	o := minioOptions(m)
	o.MaxAttempts, o.MaxBackoff, o.RequestTimeout = 2, 10*time.Millisecond, 2*time.Second
	b := newMinIOBackend(t, m, o)
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	put, err := b.Put(ctx, "k", strings.NewReader("data"), 4, backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}

	missing, _ := New(ctx, "no-such-bucket", o)
	if err := missing.Check(ctx); !errors.Is(err, backend.ErrNoBucket) {
		t.Errorf("Check of a missing bucket: %v", err)
	}
	if _, err := missing.List(ctx, "", backend.ListOptions{}); !errors.Is(err, backend.ErrNoBucket) {
		t.Errorf("List of a missing bucket: %v", err)
	}
	bad := o
	bad.SecretAccessKey = "wrong"
	wrong, _ := New(ctx, b.Bucket(), bad)
	if err := wrong.Check(ctx); !errors.Is(err, backend.ErrAccessDenied) || !strings.Contains(err.Error(), "Static") {
		t.Errorf("Check with a wrong secret: %v (want ErrAccessDenied naming the credential source)", err)
	}
	if _, err := wrong.Stat(ctx, "k"); !errors.Is(err, backend.ErrAccessDenied) {
		t.Errorf("Stat with a wrong secret: %v", err)
	}
	anon := o
	anon.NoSignRequest = true
	pub, _ := New(ctx, b.Bucket(), anon)
	if err := pub.Check(ctx); !errors.Is(err, backend.ErrAccessDenied) {
		t.Errorf("anonymous Check of a private bucket: %v", err)
	}

	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Stat with the server down: %v, want ErrUnavailable", err)
	}
	if err := b.Check(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Check with the server down: %v, want ErrUnavailable", err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	st, err := b.Stat(ctx, "k")
	if err != nil || st.Version != put.Version {
		t.Fatalf("Stat after the server came back: %+v, %v", st, err)
	}
}

// TestMinIOEnvironment reaches the server through the standard AWS
// environment only, as a subprocess given m.Env() would.
func TestMinIOEnvironment(t *testing.T) {
	m := startMinIO(t)
	bucket := m.NewBucket(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b, err := New(context.Background(), bucket, Options{ForcePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://" + bucket + "@" + strings.TrimPrefix(m.Endpoint, "http://"); b.String() != want {
		t.Errorf("String() = %q, want %q", b.String(), want)
	}
	if err := b.Check(context.Background()); err != nil {
		t.Fatalf("Check through AWS_* variables: %v", err)
	}
}

func checkNoUploads(t *testing.T, b *Backend) {
	t.Helper()
	out, err := b.client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &b.bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) > 0 {
		t.Fatalf("%d multipart uploads left behind (not aborted)", len(out.Uploads))
	}
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}

// hookReader calls hook once, the first time a read reaches offset at.
type hookReader struct {
	data []byte
	at   int64
	hook func()
	once sync.Once
}

func (h *hookReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) >= h.at {
		h.once.Do(h.hook)
	}
	return bytes.NewReader(h.data).ReadAt(p, off)
}

// TestPartsMinIO: an upload sent in parts, out of order and one part sent
// twice, becomes exactly the bytes of the parts completed, under the
// conditions a Put takes; nothing is visible before Complete, and an
// aborted or refused one leaves nothing.
func TestPartsMinIO(t *testing.T) {
	m := startMinIO(t)
	b := newMinIOBackend(t, m, minioOptions(m))
	ctx := context.Background()
	data := make([]byte, 2*minPartSize+1234)
	for i := range data {
		data[i] = byte(i * 7)
	}
	r := bytes.NewReader(data)
	up, err := b.BeginParts(ctx, "ckpt/model.pt")
	if err != nil {
		t.Fatal(err)
	}
	tags := make([]string, 3)
	for _, i := range []int{2, 0, 1} {
		off := int64(i) * minPartSize
		if tags[i], err = up.SendPart(ctx, i+1, bytes.NewReader(bytes.Repeat([]byte{9}, len(data))), off, min(minPartSize, int64(len(data))-off)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Stat(ctx, "ckpt/model.pt"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("stat before Complete: %v, want ErrNotExist", err)
	}
	for i := range 3 { // sent again: the last send of a part counts
		off := int64(i) * minPartSize
		if tags[i], err = up.SendPart(ctx, i+1, r, off, min(minPartSize, int64(len(data))-off)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := up.Complete(ctx, tags, int64(len(data)), backend.CompleteOptions{IfVersion: backend.VersionAbsent})
	if err != nil {
		t.Fatal(err)
	}
	if got := readKey(t, b, "ckpt/model.pt", info.Size); !bytes.Equal(got, data) || info.Size != int64(len(data)) {
		t.Fatalf("object of %d bytes differs from the %d sent", info.Size, len(data))
	}

	// The key exists now: a create-only completion is refused and leaves
	// the object as it was.
	up2, err := b.BeginParts(ctx, "ckpt/model.pt")
	if err != nil {
		t.Fatal(err)
	}
	tag, err := up2.SendPart(ctx, 1, bytes.NewReader([]byte("other")), 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up2.Complete(ctx, []string{tag}, 5, backend.CompleteOptions{IfVersion: backend.VersionAbsent}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("create-only completion over an existing key: %v", err)
	}
	if cur, err := b.Stat(ctx, "ckpt/model.pt"); err != nil || cur.Version != info.Version {
		t.Fatalf("after a refused completion: %+v, %v", cur, err)
	}
	// An aborted upload leaves no object.
	up3, err := b.BeginParts(ctx, "ckpt/aborted.pt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up3.SendPart(ctx, 1, r, 0, minPartSize); err != nil {
		t.Fatal(err)
	}
	up3.Abort(ctx)
	if _, err := b.Stat(ctx, "ckpt/aborted.pt"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("stat after Abort: %v, want ErrNotExist", err)
	}
	out, err := b.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &b.bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left open", len(out.Uploads))
	}
}

func readKey(t *testing.T, b *Backend, key string, n int64) []byte {
	t.Helper()
	rc, err := b.ReadRange(context.Background(), key, "", 0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
