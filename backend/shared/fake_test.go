package shared

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// memStore is an in-memory tier (and, as memOrigin, an origin) with knobs
// for latency and failures, counting what it is asked.
type memStore struct {
	name string

	mu      sync.Mutex
	objs    map[string][]byte
	vers    map[string]string
	latency time.Duration // before a GET or PUT answers
	down    bool          // every request fails with ErrUnavailable
	putGate chan struct{} // when set, Put waits for it to close (or ctx)
	stall   bool          // GET bodies send nothing until ctx ends

	gets, puts, stats atomic.Int64
	getBytes          atomic.Int64
}

func newMemStore(name string) *memStore {
	return &memStore{name: name, objs: map[string][]byte{}, vers: map[string]string{}}
}

func (m *memStore) String() string { return m.name }

func (m *memStore) set(fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn()
}

func (m *memStore) state() (time.Duration, bool, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latency, m.down, m.putGate
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *memStore) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	m.gets.Add(1)
	lat, down, _ := m.state()
	if err := wait(ctx, lat); err != nil {
		return nil, fmt.Errorf("mem: get %s: %w", key, err)
	}
	if down {
		return nil, fmt.Errorf("mem: get %s: %w", key, backend.ErrUnavailable)
	}
	m.mu.Lock()
	b, ok := m.objs[key]
	v := m.vers[key]
	m.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("mem: get %s: %w", key, backend.ErrNotExist)
	case version != "" && version != v:
		return nil, fmt.Errorf("mem: get %s: %w", key, backend.ErrVersionChanged)
	case off+n > int64(len(b)):
		return nil, fmt.Errorf("mem: get %s: range past the end: %w", key, io.ErrUnexpectedEOF)
	}
	m.getBytes.Add(n)
	if m.stalled() {
		return io.NopCloser(stallReader{ctx}), nil
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(b[off : off+n]))), nil
}

func (m *memStore) stalled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stall
}

// stallReader is a body that sends nothing until its request is cancelled.
type stallReader struct{ ctx context.Context }

func (s stallReader) Read([]byte) (int, error) {
	<-s.ctx.Done()
	return 0, s.ctx.Err()
}

func (m *memStore) Put(ctx context.Context, key string, r io.ReaderAt, size int64, _ backend.PutOptions) (backend.ObjectInfo, error) {
	lat, down, gate := m.state()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return backend.ObjectInfo{}, ctx.Err()
		}
	}
	if err := wait(ctx, lat); err != nil {
		return backend.ObjectInfo{}, err
	}
	if down {
		return backend.ObjectInfo{}, fmt.Errorf("mem: put %s: %w", key, backend.ErrUnavailable)
	}
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && err != io.EOF {
		return backend.ObjectInfo{}, err
	}
	m.puts.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = b
	m.vers[key] = fmt.Sprintf("v%d", m.puts.Load())
	return backend.ObjectInfo{Key: key, Size: size, Version: m.vers[key]}, nil
}

func (m *memStore) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	m.stats.Add(1)
	_, down, _ := m.state()
	if down {
		return backend.ObjectInfo{}, fmt.Errorf("mem: stat %s: %w", key, backend.ErrUnavailable)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return backend.ObjectInfo{}, fmt.Errorf("mem: stat %s: %w", key, backend.ErrNotExist)
	}
	return backend.ObjectInfo{Key: key, Size: int64(len(b)), Version: m.vers[key]}, nil
}

func (m *memStore) List(ctx context.Context, prefix string, _ backend.ListOptions) (backend.ListPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var p backend.ListPage
	for k, b := range m.objs {
		if strings.HasPrefix(k, prefix) {
			p.Objects = append(p.Objects, backend.ObjectInfo{Key: k, Size: int64(len(b)), Version: m.vers[k]})
		}
	}
	sort.Slice(p.Objects, func(i, j int) bool { return p.Objects[i].Key < p.Objects[j].Key })
	return p, nil
}

// keys lists the stored keys under prefix, sorted.
func (m *memStore) keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (m *memStore) get(key string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.objs[key])
}

func (m *memStore) putRaw(key string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = bytes.Clone(b)
	if m.vers[key] == "" {
		m.vers[key] = "raw"
	}
}

// origin is a memStore with objects uploaded; it is a backend.Backend.
type origin struct{ *memStore }

func newOrigin(t *testing.T, files map[string][]byte) origin {
	t.Helper()
	o := origin{newMemStore("mem://origin")}
	for k, v := range files {
		o.putRaw(k, v)
		o.set(func() { o.vers[k] = fmt.Sprintf("etag-%x", Checksum(v)) })
	}
	return o
}

func (o origin) version(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.vers[key]
}

// testOptions are small and fast: 4 KiB blocks, short timeouts.
func testOptions() Options {
	o := DefaultOptions()
	o.BlockSize, o.GroupSize = 4096, 4096
	o.Timeout = 200 * time.Millisecond
	o.Lookahead = 8
	o.IdleFlush = 50 * time.Millisecond
	o.DrainTimeout = 5 * time.Second
	o.BreakerCooldown, o.BreakerMaxCooldown = 200*time.Millisecond, time.Second
	o.Logger = slog.New(slog.DiscardHandler)
	return o
}

// newTier builds a tier and closes it at the end of the test.
func newTier(t *testing.T, org backend.Backend, store Store, o Options) *Tier {
	t.Helper()
	tier, err := New(org, store, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	return tier
}

// readAll reads [off, off+n) of key through be with reads of chunk bytes
// (0: all at once).
func readAll(t *testing.T, be backend.Backend, key, version string, off, n int64, chunk int) ([]byte, error) {
	t.Helper()
	rc, err := be.ReadRange(context.Background(), key, version, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if chunk == 0 {
		chunk = int(n)
	}
	out := make([]byte, 0, n)
	buf := make([]byte, chunk)
	for {
		k, err := rc.Read(buf)
		out = append(out, buf[:k]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func payload(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
