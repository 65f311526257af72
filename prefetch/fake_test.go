package prefetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
)

// fakeBackend serves objects from memory, counting GETs and bytes, with
// optional latency, a switch to fail everything, and a hook that can cut
// bodies short.
type fakeBackend struct {
	mu      sync.Mutex
	objs    map[string][]byte
	vers    map[string]string
	gets    atomic.Int64
	bytes   atomic.Int64
	latency time.Duration
	down    atomic.Bool
	cutNext atomic.Int64 // the next N bodies fail halfway
}

func newFake() *fakeBackend {
	return &fakeBackend{objs: map[string][]byte{}, vers: map[string]string{}}
}

func (f *fakeBackend) put(key string, data []byte, version string) {
	f.mu.Lock()
	f.objs[key], f.vers[key] = data, version
	f.mu.Unlock()
}

func (f *fakeBackend) String() string { return "fake://b" }

func (f *fakeBackend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.objs[key]
	if !ok {
		return backend.ObjectInfo{}, backend.ErrNotExist
	}
	return backend.ObjectInfo{Key: key, Size: int64(len(d)), Version: f.vers[key]}, nil
}

func (f *fakeBackend) List(context.Context, string, backend.ListOptions) (backend.ListPage, error) {
	return backend.ListPage{}, nil
}

func (f *fakeBackend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	f.gets.Add(1)
	if f.latency > 0 {
		select {
		case <-time.After(f.latency):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.down.Load() {
		return nil, backend.ErrUnavailable
	}
	f.mu.Lock()
	d, ok := f.objs[key]
	v := f.vers[key]
	f.mu.Unlock()
	if !ok {
		return nil, backend.ErrNotExist
	}
	if version != "" && version != v {
		return nil, backend.ErrVersionChanged
	}
	if off < 0 || off+n > int64(len(d)) {
		return nil, errors.New("fake: range out of bounds")
	}
	f.bytes.Add(n)
	body := d[off : off+n]
	if f.cutNext.Add(-1) >= 0 {
		return io.NopCloser(&cutReader{r: bytes.NewReader(body), left: n / 2}), nil
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

// cutReader fails like a connection reset after left bytes.
type cutReader struct {
	r    io.Reader
	left int64
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("connection reset by peer")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
