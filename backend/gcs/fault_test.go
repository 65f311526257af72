package gcs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// faultSetup is a bucket behind a fault proxy, with quick retries.
func faultSetup(t *testing.T) (*faultProxy, *Backend, *Backend) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	f := startFake(t, "bkt")
	p := newFaultProxy(t, f)
	b := newTestBackend(t, p.URL, "bkt", fastRetries)
	direct := newTestBackend(t, f.Endpoint, "bkt", nil) // bypasses the proxy
	return p, b, direct
}

func isStat(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/storage/v1/b/bkt/o/")
}
func isList(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Path == "/storage/v1/b/bkt/o"
}
func isChunk(r *http.Request) bool  { return r.URL.Query().Get("upload_id") != "" }
func isDelete(r *http.Request) bool { return r.Method == http.MethodDelete }

func TestRetriesTransientStatuses(t *testing.T) {
	p, b, direct := faultSetup(t)
	ctx := context.Background()
	data := testData(4000, 1)
	info := mustPut(t, direct, "k", data, backend.PutOptions{})
	ops := []struct {
		name  string
		match func(*http.Request) bool
		run   func() error
	}{
		{"Stat", isStat, func() error { _, err := b.Stat(ctx, "k"); return err }},
		{"List", isList, func() error { _, err := b.List(ctx, "", backend.ListOptions{}); return err }},
		{"ReadRange", isMediaRead, func() error {
			got, err := readAll(ctx, b, "k", info.Version, 10, 100)
			if err == nil && !bytes.Equal(got, data[10:110]) {
				err = errors.New("wrong bytes")
			}
			return err
		}},
		{"Put", isUpload, func() error {
			_, err := b.Put(ctx, "up", bytes.NewReader(data), int64(len(data)), backend.PutOptions{})
			return err
		}},
		{"PutResumable", isUpload, func() error {
			big := testData(3*chunkQuantum+5, 2)
			_, err := b.Put(ctx, "up-big", bytes.NewReader(big), int64(len(big)), backend.PutOptions{PartSize: chunkQuantum})
			return err
		}},
		{"PutChunk", isChunk, func() error {
			big := testData(3*chunkQuantum+5, 3)
			info, err := b.Put(ctx, "up-chunks", bytes.NewReader(big), int64(len(big)), backend.PutOptions{PartSize: chunkQuantum})
			if err == nil {
				var got []byte
				got, err = readAll(ctx, direct, "up-chunks", info.Version, 0, int64(len(big)))
				if err == nil && !bytes.Equal(got, big) {
					err = errors.New("uploaded bytes differ")
				}
			}
			return err
		}},
		{"Delete", isDelete, func() error { return b.Delete(ctx, "up") }},
	}
	for _, op := range ops {
		for _, code := range []int{408, 429, 500, 502, 503, 504} {
			p.set(statusFault(code, 2, op.match))
			if err := op.run(); err != nil {
				t.Errorf("%s with 2 × %d then success: %v", op.name, code, err)
			}
			if got := p.hits.Load(); got != 2 {
				t.Errorf("%s with %d: fault hit %d times, want 2", op.name, code, got)
			}
		}
	}
}

func TestRetriesExhausted(t *testing.T) {
	p, b, direct := faultSetup(t)
	ctx := context.Background()
	mustPut(t, direct, "k", []byte("data"), backend.PutOptions{})
	p.set(statusFault(503, 1000, func(*http.Request) bool { return true }))
	_, err := b.Stat(ctx, "k")
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Stat with 503 forever: %v, want ErrUnavailable", err)
	}
	if got := p.hits.Load(); got != 3 {
		t.Errorf("Stat made %d attempts, want MaxAttempts = 3", got)
	}
	if !strings.Contains(err.Error(), "gcs: stat k:") {
		t.Errorf("error %q is not wrapped as gcs: stat k: ...", err)
	}
	_, err = readAll(ctx, b, "k", "", 0, 4)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("ReadRange with 503 forever: %v, want ErrUnavailable", err)
	}
	for _, size := range []int{1, 3 * chunkQuantum} {
		p.set(statusFault(503, 1000, func(*http.Request) bool { return true }))
		_, err = b.Put(ctx, "new", bytes.NewReader(testData(size, 1)), int64(size), backend.PutOptions{PartSize: chunkQuantum})
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Put of %d bytes with 503 forever: %v, want ErrUnavailable", size, err)
		}
		if got := p.hits.Load(); got != 3 {
			t.Errorf("Put of %d bytes made %d attempts, want MaxAttempts = 3", size, got)
		}
	}
	// Chunks fail forever once the session is open.
	p.set(statusFault(503, 1000, isChunk))
	big := testData(3*chunkQuantum, 2)
	_, err = b.Put(ctx, "new", bytes.NewReader(big), int64(len(big)), backend.PutOptions{PartSize: chunkQuantum})
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Put whose chunks fail forever: %v, want ErrUnavailable", err)
	}
	if _, err := direct.Stat(ctx, "new"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("a failed Put left an object: %v", err)
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	p, b, direct := faultSetup(t)
	ctx := context.Background()
	mustPut(t, direct, "k", []byte("data"), backend.PutOptions{})
	for _, c := range []struct {
		code int
		want error
	}{
		{401, backend.ErrAccessDenied},
		{403, backend.ErrAccessDenied},
		{404, backend.ErrNotExist},
		{412, backend.ErrPreconditionFailed},
	} {
		p.set(statusFault(c.code, 1000, isStat))
		_, err := b.Stat(ctx, "k")
		if !errors.Is(err, c.want) {
			t.Errorf("Stat answered %d: %v, want %v", c.code, err, c.want)
		}
		if got := p.hits.Load(); got != 1 {
			t.Errorf("Stat answered %d was tried %d times, want 1", c.code, got)
		}
	}
	p.set(statusFault(403, 1000, isList))
	err := b.Check(ctx)
	if !errors.Is(err, backend.ErrAccessDenied) || !strings.Contains(err.Error(), "storage.objects.list") {
		t.Errorf("Check answered 403: %v, want ErrAccessDenied naming the permission", err)
	}
}

func TestResponseHeaderTimeoutIsRetried(t *testing.T) {
	p, _, direct := faultSetup(t)
	info := mustPut(t, direct, "k", []byte("data"), backend.PutOptions{})
	b := newTestBackend(t, p.URL, "bkt", func(o *Options) {
		fastRetries(o)
		o.RequestTimeout = 200 * time.Millisecond
	})
	first := true
	p.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !isStat(r) || !first {
			return false
		}
		first = false
		<-r.Context().Done() // never answer: the client must give up
		return true
	})
	start := time.Now()
	got, err := b.Stat(context.Background(), "k")
	if err != nil || got.Version != info.Version {
		t.Fatalf("Stat after one hung attempt: %+v, %v", got, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
		t.Errorf("Stat took %v; want one RequestTimeout (200ms) plus a retry", d)
	}
}

func TestStalledBodyIsUnavailable(t *testing.T) {
	p, b, direct := faultSetup(t)
	data := testData(1<<20, 3)
	info := mustPut(t, direct, "k", data, backend.PutOptions{})
	p.set(p.bodyFault(1000, 4096, true, nil))
	start := time.Now()
	got, err := readAll(context.Background(), b, "k", info.Version, 0, int64(len(data)))
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, errStalled) {
		t.Fatalf("read of a stalled body: %d bytes, %v; want ErrUnavailable (stalled)", len(got), err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("stall detected after %v, want about StallTimeout (300ms)", d)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Errorf("bytes before the stall are wrong")
	}
}

func TestTruncatedBodyResumesAtOffset(t *testing.T) {
	p, b, direct := faultSetup(t)
	data := testData(1<<20, 4)
	info := mustPut(t, direct, "k", data, backend.PutOptions{})
	for _, version := range []string{info.Version, ""} {
		p.set(p.bodyFault(1, 100000, false, nil))
		got, err := readAll(context.Background(), b, "k", version, 5, int64(len(data))-5)
		if err != nil || !bytes.Equal(got, data[5:]) {
			t.Fatalf("version %q: read cut once: %d bytes, %v; want the object from the rest", version, len(got), err)
		}
		if p.hits.Load() != 1 || p.seen.Load() < 2 {
			t.Fatalf("version %q: fault hit %d of %d requests; want a cut then a re-request", version, p.hits.Load(), p.seen.Load())
		}
	}
}

func TestTruncatedForeverFails(t *testing.T) {
	p, b, direct := faultSetup(t)
	data := testData(100000, 5)
	mustPut(t, direct, "k", data, backend.PutOptions{})
	p.set(p.bodyFault(1<<30, 0, false, nil))
	got, err := readAll(context.Background(), b, "k", "", 0, int64(len(data)))
	if err == nil {
		t.Fatalf("read of a body cut on every attempt returned %d bytes and no error", len(got))
	}
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("read of a body cut on every attempt: %v, want ErrUnavailable", err)
	}
}

// A body broken mid-read is re-requested at the generation first seen;
// if that generation was replaced meanwhile, the read fails rather than
// mix two versions.
func TestReplacedDuringRead(t *testing.T) {
	p, b, direct := faultSetup(t)
	ctx := context.Background()
	old := testData(200000, 6)
	for _, pinned := range []bool{true, false} {
		info := mustPut(t, direct, "k", old, backend.PutOptions{})
		version := ""
		if pinned {
			version = info.Version
		}
		p.set(p.bodyFault(1, 50000, false, func() {
			mustPut(t, direct, "k", testData(200000, 7), backend.PutOptions{})
		}))
		got, err := readAll(ctx, b, "k", version, 0, int64(len(old)))
		if len(got) < 50000 {
			t.Fatalf("pinned=%v: read failed before the cut: %d bytes, %v", pinned, len(got), err)
		}
		if !errors.Is(err, backend.ErrVersionChanged) {
			t.Fatalf("pinned=%v: read across a replacement: %d bytes, %v; want ErrVersionChanged", pinned, len(got), err)
		}
		if !bytes.Equal(got, old[:len(got)]) {
			t.Fatalf("pinned=%v: bytes before the failure are not the old version's", pinned)
		}
	}
}

// Close from another goroutine unblocks a Read waiting on the network.
func TestCloseUnblocksRead(t *testing.T) {
	p, _, direct := faultSetup(t)
	data := testData(1<<20, 8)
	mustPut(t, direct, "k", data, backend.PutOptions{})
	b := newTestBackend(t, p.URL, "bkt", func(o *Options) {
		fastRetries(o)
		o.StallTimeout = time.Minute // only Close can end this read
	})
	p.set(p.bodyFault(1, 1000, true, nil))
	rc, err := b.ReadRange(context.Background(), "k", "", 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(rc)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := rc.Close(); err != nil {
		t.Fatalf("Close during a Read: %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a Read cut by Close reported success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock the Read")
	}
}
