package s3

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestReadHeadBodyFailureStillAnswers: a ReadHead whose body breaks or
// stalls after the headers still answers the lookup (the headers carry the
// size and version), without data and at once, not after the body's
// retries: a lookup must not fail, or wait, for bytes it only reads ahead.
func TestReadHeadBodyFailureStillAnswers(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB
	for _, c := range []struct {
		name  string
		setup func(f *fakeS3)
	}{
		{"Cut", func(f *fakeS3) { f.cutAfter(1000, 100) }},
		{"Stall", func(f *fakeS3) { f.stallAfter(1000, 100) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, b := newFake(t, data)
			c.setup(f)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			info, head, err := b.ReadHead(ctx, "obj", 256<<10)
			if err != nil || info.Size != int64(len(data)) || info.Version != f.etag {
				t.Fatalf("ReadHead = %+v, %v; want the object's size and version", info, err)
			}
			if head != nil {
				t.Fatalf("%d bytes of a broken body returned", len(head))
			}
			if g := f.gets.Load(); g != 1 {
				t.Errorf("%d GETs, want 1 (the data is only read ahead)", g)
			}
		})
	}
}

// TestReadHeadWhole: a healthy ReadHead returns the object whole when it
// is smaller than asked, and its first bytes otherwise.
func TestReadHeadWhole(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 8<<10)
	_, b := newFake(t, data)
	for _, n := range []int64{256 << 10, 1000} {
		info, head, err := b.ReadHead(context.Background(), "obj", n)
		if err != nil || info.Size != int64(len(data)) || !bytes.Equal(head, data[:min(n, int64(len(data)))]) {
			t.Fatalf("n %d: %+v, %d bytes, %v", n, info, len(head), err)
		}
	}
}
