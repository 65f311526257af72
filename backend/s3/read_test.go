package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

func TestReadResumesBrokenBodies(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 32<<10) // 1 MiB
	cases := []struct {
		name     string
		setup    func(f *fakeS3)
		wantErr  error
		wantGets int32
		errText  string
	}{
		{"CutOnceThenFine", func(f *fakeS3) { f.cutAfter(100_000, 1) }, nil, 2, ""},
		{"CutTwiceThenFine", func(f *fakeS3) { f.cutAfter(100_000, 2) }, nil, 3, ""},
		{"CutEveryTime", func(f *fakeS3) { f.cutAfter(1000, 100) }, backend.ErrUnavailable, 3, "after 2 resumes"},
		{"StallOnceThenFine", func(f *fakeS3) { f.stallAfter(1000, 1) }, nil, 2, ""},
		{"StallEveryTime", func(f *fakeS3) { f.stallAfter(1000, 100) }, backend.ErrUnavailable, 3, "no data for"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, b := newFake(t, data)
			c.setup(f)
			// A hung read fails the test through this deadline instead of
			// stalling it; the wanted errors come long before.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rc, err := b.ReadRange(ctx, "obj", "", 10, int64(len(data))-20)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if c.wantErr == nil {
				if err != nil || !bytes.Equal(got, data[10:len(data)-10]) {
					t.Fatalf("got %d bytes, %v; want the range after resuming", len(got), err)
				}
			} else {
				if !errors.Is(err, c.wantErr) || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %d bytes, %v; want %v", len(got), err, c.wantErr)
				}
				if !strings.Contains(err.Error(), c.errText) {
					t.Errorf("error %q does not say %q", err, c.errText)
				}
				if len(got) >= len(data)-20 {
					t.Fatalf("the whole range was returned with an error")
				}
			}
			if g := f.gets.Load(); g != c.wantGets {
				t.Errorf("%d GETs, want %d", g, c.wantGets)
			}
		})
	}
}

func TestReadSlowConsumerIsNotAStall(t *testing.T) {
	// The stall guard and the attempt timeout only count time spent
	// waiting on the server, never time the caller spends elsewhere.
	data := bytes.Repeat([]byte("x"), 4<<20)
	_, b := newFake(t, data)
	b.opt.RequestTimeout, b.opt.ReadStallTimeout = 200*time.Millisecond, 200*time.Millisecond
	rc, err := b.ReadRange(context.Background(), "obj", "", 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 64<<10)
	total := 0
	for i := 0; ; i++ {
		n, err := rc.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", total, err)
		}
		if i < 2 {
			time.Sleep(300 * time.Millisecond) // longer than both limits
		}
	}
	if total != len(data) {
		t.Fatalf("read %d bytes, want %d", total, len(data))
	}
}

func TestReadChecks(t *testing.T) {
	data := []byte("0123456789")
	f, b := newFake(t, data)
	if _, err := readAll(t, b, "wrong-etag", 0, 5); !errors.Is(err, backend.ErrVersionChanged) {
		t.Errorf("pinned to another ETag: %v, want ErrVersionChanged", err)
	}
	if _, err := readAll(t, b, "wrong-etag", 0, 0); !errors.Is(err, backend.ErrVersionChanged) {
		t.Errorf("0-byte read pinned to another ETag: %v, want ErrVersionChanged", err)
	}
	if got, err := readAll(t, b, f.etag, 2, 3); err != nil || string(got) != "234" {
		t.Errorf("pinned read = %q, %v", got, err)
	}
	if got, err := readAll(t, b, "", 5, 10); err == nil {
		t.Errorf("range past the end returned %q and no error", got)
	}
	f.set(func() { f.ignoreRange = true })
	if got, err := readAll(t, b, "", 3, 2); err == nil {
		t.Errorf("server ignoring Range: got %q and no error", got)
	}
	if got, err := readAll(t, b, "", 0, 4); err != nil || string(got) != "0123" {
		t.Errorf("whole-object answer to a range from 0: %q, %v", got, err)
	}
	if _, err := b.Stat(context.Background(), "missing"); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("Stat(missing) = %v", err)
	}
}

func TestRetriesAndAttemptTimeouts(t *testing.T) {
	ctx := context.Background()
	t.Run("5xxThenSuccess", func(t *testing.T) {
		f, b := newFake(t, []byte("x"))
		f.set(func() { f.fail5xx = 2 })
		if _, err := b.Stat(ctx, "obj"); err != nil {
			t.Fatalf("Stat after two 503s: %v", err)
		}
		if n := f.requests.Load(); n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
	})
	t.Run("5xxExhausted", func(t *testing.T) {
		f, b := newFake(t, []byte("x"))
		f.set(func() { f.fail5xx = 100 })
		_, err := b.Stat(ctx, "obj")
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Stat against a failing server: %v, want ErrUnavailable", err)
		}
		if n := f.requests.Load(); n != int32(b.opt.MaxAttempts) {
			t.Errorf("%d requests, want MaxAttempts=%d", n, b.opt.MaxAttempts)
		}
	})
	t.Run("SlowHeadersRetriedThenUnavailable", func(t *testing.T) {
		f, b := newFake(t, []byte("x"))
		b.opt.RequestTimeout = 100 * time.Millisecond
		f.set(func() { f.delay = 2 * time.Second })
		for _, op := range []struct {
			do   func() error
			want int32
		}{
			// A metadata request's timed-out attempt is retried, once: a
			// second timeout takes the endpoint for silent (stall.go).
			{func() error { _, err := b.Stat(ctx, "obj"); return err }, silentAfter},
			// A GET's attempts are not counted: its caller bounds it.
			{func() error { _, err := readAll(t, b, "", 0, 1); return err }, int32(b.opt.MaxAttempts)},
		} {
			before := f.requests.Load()
			err := op.do()
			if !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, context.Canceled) {
				t.Fatalf("slow server: %v, want ErrUnavailable", err)
			}
			if n := f.requests.Load() - before; n != op.want {
				t.Errorf("%d attempts, want %d: a timed-out attempt must be retried", n, op.want)
			}
		}
	})
	t.Run("ResponseTimeoutBoundsGETsAndLookups", func(t *testing.T) {
		// Headers 500 ms late: within RequestTimeout (a listing page
		// waits), past ResponseTimeout (every attempt of a GET, a HEAD or
		// a one-key LIST, what a lookup sends, times out: on a network
		// gone silent a lookup waited 30 s an attempt before).
		f, b := newFake(t, []byte("x"))
		b.opt.RequestTimeout, b.opt.ResponseTimeout = 10*time.Second, 100*time.Millisecond
		f.set(func() { f.delay = 500 * time.Millisecond })
		if _, err := b.List(ctx, "", backend.ListOptions{}); errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("a listing page with headers 500 ms late and RequestTimeout 10 s: %v", err)
		}
		if _, err := b.Stat(ctx, "obj"); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Stat with headers 500 ms late and ResponseTimeout 100 ms: %v, want ErrUnavailable", err)
		}
		if _, err := b.List(ctx, "obj/", backend.ListOptions{Limit: 1}); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("one-key LIST with headers 500 ms late and ResponseTimeout 100 ms: %v, want ErrUnavailable", err)
		}
		before := f.requests.Load()
		if _, err := readAll(t, b, "", 0, 1); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("GET with headers 500 ms late and ResponseTimeout 100 ms: %v, want ErrUnavailable", err)
		}
		if n := f.requests.Load() - before; n != int32(b.opt.MaxAttempts) {
			t.Errorf("%d GET attempts, want %d", n, b.opt.MaxAttempts)
		}
	})
	t.Run("CallerCancelIsNotUnavailable", func(t *testing.T) {
		f, b := newFake(t, []byte("x"))
		f.set(func() { f.delay = 2 * time.Second })
		c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := b.Stat(c, "obj")
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Stat with an expiring caller context: %v", err)
		}
	})
	t.Run("ConnectionRefused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		o := DefaultOptions()
		o.Endpoint, o.Region, o.ForcePathStyle = "http://"+addr, "us-east-1", true
		o.AccessKeyID, o.SecretAccessKey = "ak", "sk"
		o.MaxAttempts, o.MaxBackoff = 2, time.Millisecond
		b, err := New(ctx, "bucket", o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(ctx, "k"); !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("Stat: %v, want ErrUnavailable", err)
		}
		if err := b.Check(ctx); !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("Check: %v, want ErrUnavailable", err)
		}
	})
}
