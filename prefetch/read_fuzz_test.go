package prefetch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/faults"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/prefetch"
)

// Reads through the fetcher from a backend that fails, resets and
// truncates (backend/faults): whatever the offsets, lengths and faults, a
// read returns the object's bytes or an error, never other bytes.

const rbs = 16 << 10 // block size of these tests

// memBackend serves objects from memory (version "v1").
type memBackend struct {
	mu   sync.RWMutex
	objs map[string][]byte
}

func (m *memBackend) String() string { return "mem://fuzz" }

func (m *memBackend) put(key string, b []byte) {
	m.mu.Lock()
	m.objs[key] = b
	m.mu.Unlock()
}

func (m *memBackend) Stat(_ context.Context, key string) (backend.ObjectInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.objs[key]
	if !ok {
		return backend.ObjectInfo{}, backend.ErrNotExist
	}
	return backend.ObjectInfo{Key: key, Size: int64(len(b)), Version: "v1"}, nil
}

func (m *memBackend) List(context.Context, string, backend.ListOptions) (backend.ListPage, error) {
	return backend.ListPage{}, nil
}

func (m *memBackend) ReadRange(_ context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	m.mu.RLock()
	b, ok := m.objs[key]
	m.mu.RUnlock()
	switch {
	case !ok:
		return nil, backend.ErrNotExist
	case version != "" && version != "v1":
		return nil, backend.ErrVersionChanged
	case off < 0 || n < 0 || off+n > int64(len(b)):
		return nil, fmt.Errorf("mem: range [%d,+%d) of %d bytes: %w", off, n, len(b), io.ErrUnexpectedEOF)
	}
	return io.NopCloser(bytes.NewReader(b[off : off+n])), nil
}

// retrying does what every real backend does below the fetcher: each
// attempt bounded in time, transient failures retried a few times.
type retrying struct {
	backend.Backend
	attempts int
	timeout  time.Duration
}

func (r retrying) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	var err error
	for a := 0; a < r.attempts; a++ {
		actx, cancel := context.WithTimeout(ctx, r.timeout)
		var rc io.ReadCloser
		rc, err = r.Backend.ReadRange(actx, key, version, off, n)
		if err == nil {
			return cancelOnClose{rc, cancel}, nil
		}
		cancel()
		if ctx.Err() != nil || !errors.Is(err, backend.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("retrying: %w: %w", backend.ErrUnavailable, err)
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { defer c.cancel(); return c.ReadCloser.Close() }

// stack is a cache and a fetcher over mem, behind faults and retries.
type stack struct {
	mem   *memBackend
	flt   *faults.Backend
	store *cache.Store
	f     *prefetch.Fetcher
}

func newStack(tb testing.TB, fo faults.Options) *stack {
	tb.Helper()
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.BlockSize, so.Engine, so.MaxBytes, so.MinFree = rbs, eng, 4<<30, 0
	store, err := cache.Open(tb.TempDir(), so)
	if err != nil {
		tb.Fatal(err)
	}
	mem := &memBackend{objs: map[string][]byte{}}
	flt := faults.New(mem, fo)
	po := prefetch.DefaultOptions()
	po.PartBlocks, po.InitialWindow, po.MaxWindow, po.SmallObject = 4, 2*rbs, 16*rbs, 3*rbs
	po.RetryBackoff, po.RequestTimeout = time.Millisecond, 30*time.Second
	po.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	f := prefetch.New(retrying{flt, 5, 250 * time.Millisecond}, prefetch.NewBudget(64*rbs, rbs), po)
	tb.Cleanup(func() { f.Close(); store.Close(); eng.Close() })
	return &stack{mem: mem, flt: flt, store: store, f: f}
}

func (s *stack) open(tb testing.TB, key string) *cache.Object {
	tb.Helper()
	info, err := s.mem.Stat(context.Background(), key)
	if err != nil {
		tb.Fatal(err)
	}
	o, err := s.store.Acquire(cache.ObjectKey{Source: s.mem.String(), Key: key, Version: info.Version, Size: info.Size})
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// content is object seed's bytes.
func content(seed uint64, n int) []byte {
	b := make([]byte, n)
	x := seed*0x9e3779b97f4a7c15 | 1
	for i := 0; i < n; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:], w[:])
	}
	return b
}

// readWhole reads an object through a new handle in chunk-sized reads.
func readWhole(ctx context.Context, f *prefetch.Fetcher, o *cache.Object, chunk int) ([]byte, error) {
	r := f.NewReader(o)
	out := make([]byte, 0, o.Size())
	buf := make([]byte, chunk)
	for off := int64(0); off < o.Size(); {
		n, err := r.ReadAt(ctx, buf, off)
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, fmt.Errorf("read at %d of %d: no progress", off, o.Size())
		}
		out = append(out, buf[:n]...)
		off += int64(n)
	}
	return out, nil
}

var fuzzSeq atomic.Uint64

// FuzzReadRanges: two handles read arbitrary ranges of one object at once
// while faults fly; every successful read is the object's bytes. Once the
// faults stop, the whole object reads back.
func FuzzReadRanges(f *testing.F) {
	f.Add(uint32(5*rbs+123), []byte{0, 0, 0, 64, 0, 1, 0, 64, 9, 9, 1, 0}, uint64(1), uint8(0x55))
	f.Add(uint32(rbs), []byte{255, 255, 255, 255}, uint64(2), uint8(0xff))
	f.Add(uint32(40*rbs), []byte{1, 0, 0, 2, 3, 0, 0, 2, 5, 0, 0, 2, 7, 0, 0, 2}, uint64(3), uint8(0x12))
	s := newStack(f, faults.Options{})
	f.Fuzz(func(t *testing.T, size32 uint32, reads []byte, seed uint64, rates uint8) {
		size := int64(size32 % (48 * rbs))
		key := fmt.Sprint("obj", fuzzSeq.Add(1))
		data := content(seed, int(size))
		s.mem.put(key, data)
		s.flt.Update(func(o *faults.Options) {
			o.Seed = seed
			o.FailureRate = float64(rates&3) * 0.1
			o.ResetRate = float64(rates>>2&3) * 0.1
			o.TruncateRate = float64(rates>>4&3) * 0.1
		})
		defer s.flt.Update(func(o *faults.Options) { o.FailureRate, o.ResetRate, o.TruncateRate = 0, 0, 0 })
		o := s.open(t, key)
		defer o.Release()
		var wg sync.WaitGroup
		for h := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := s.f.NewReader(o)
				for i := h * 4; i+4 <= len(reads); i += 8 {
					off := int64(binary.LittleEndian.Uint16(reads[i:])) * 37 % (size + 2*rbs)
					n := int64(binary.LittleEndian.Uint16(reads[i+2:])) % (4*rbs + 3)
					p := make([]byte, n)
					got, err := r.ReadAt(context.Background(), p, off)
					lo := min(off, size)
					end := max(min(off+n, size), lo)
					if err == nil && (int64(got) != end-lo || !bytes.Equal(p[:got], data[lo:end])) {
						t.Errorf("ReadAt(%d, %d) of %d bytes = %d bytes, differing from the object", off, n, size, got)
					}
				}
			}()
		}
		wg.Wait()
		s.flt.Update(func(o *faults.Options) { o.FailureRate, o.ResetRate, o.TruncateRate = 0, 0, 0 })
		var got []byte
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			// The breaker may fail fast for a second after the faults.
			if got, err = readWhole(context.Background(), s.f, o, 128<<10); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after the faults: %d of %d bytes, %v (equal %v)", len(got), size, err, bytes.Equal(got, data))
		}
	})
}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

// TestTreeUnderInjectedFaults: 8 readers read every object of a 2,000
// object tree while 5% of backend calls fail, 2% of bodies reset and 2%
// are cut short, 1% of calls stall past the attempt timeout and latency
// jitters. Every read returns the right bytes, none takes longer than its
// bound. Then the backend goes away: uncached reads fail with
// ErrUnavailable within a bound, cached objects are still served, and
// reads work again once it is back.
func TestTreeUnderInjectedFaults(t *testing.T) {
	files, readers := 2000, 8
	if testing.Short() {
		files = 500 // make unit
	}
	var hangs atomic.Int64
	hang := func(_ context.Context, c faults.Call) faults.Fault {
		if c.Occurrence == 1 && sum([]byte(c.Key))[0] < 3 { // about 1%: the first try stalls
			hangs.Add(1)
			return faults.Fault{Delay: time.Hour}
		}
		return faults.Fault{}
	}
	s := newStack(t, faults.Options{Seed: 8, FailureRate: 0.05, ResetRate: 0.02, TruncateRate: 0.02,
		Jitter: 2 * time.Millisecond, Hooks: map[faults.Op]faults.Hook{faults.OpRead: hang}})
	want := map[string][32]byte{}
	keys := make([]string, 0, files)
	for i := range files + 5 {
		n := 1 + int(sum([]byte{byte(i), byte(i >> 8)})[0])*160 // up to 40 KiB
		if i%50 == 0 {
			n = 1<<20 + i*997 // and some of 1-3 MiB
		}
		key := fmt.Sprintf("d%02d/f%04d", i%37, i)
		data := content(uint64(i), n)
		s.mem.put(key, data)
		if i < files {
			want[key] = sum(data)
			keys = append(keys, key)
		}
	}
	const bound = 30 * time.Second // a generous bound on any one object
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				key := keys[(i*7+g*files/readers)%files]
				o := s.open(t, key)
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), bound)
				got, err := readWhole(ctx, s.f, o, 128<<10)
				cancel()
				o.Release()
				if err != nil || sum(got) != want[key] {
					if bad.Add(1) <= 10 {
						t.Errorf("reader %d: %s: %v after %v (right bytes: %v)", g, key, err, time.Since(start), sum(got) == want[key])
					}
				}
			}
		}()
	}
	wg.Wait()
	st := s.flt.Stats()
	t.Logf("%d object reads, %d wrong; injected: %d calls, %d failures, %d resets, %d truncations, %d stalls",
		files*readers, bad.Load(), st.Calls, st.Failures, st.Resets, st.Truncations, hangs.Load())
	if st.Failures == 0 || st.Resets == 0 || st.Truncations == 0 || hangs.Load() == 0 {
		t.Fatalf("faults were not injected: %+v", st)
	}

	// The backend goes away.
	s.flt.Update(func(o *faults.Options) { o.FailureRate, o.Hooks = 1, nil })
	uncached := fmt.Sprintf("d%02d/f%04d", files%37, files)
	o := s.open(t, uncached)
	start := time.Now()
	if _, err := readWhole(context.Background(), s.f, o, 128<<10); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("uncached read with the backend gone: %v (want ErrUnavailable)", err)
	}
	if d := time.Since(start); d > bound {
		t.Fatalf("uncached read failed only after %v", d)
	}
	for _, key := range keys[:50] {
		c := s.open(t, key)
		got, err := readWhole(context.Background(), s.f, c, 128<<10)
		c.Release()
		if err != nil || sum(got) != want[key] {
			t.Fatalf("cached %s with the backend gone: %v", key, err)
		}
	}
	// And comes back.
	s.flt.Update(func(o *faults.Options) { o.FailureRate = 0 })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := readWhole(context.Background(), s.f, o, 128<<10)
		if err == nil && bytes.Equal(got, content(uint64(files), len(got))) && int64(len(got)) == o.Size() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uncached read 15s after the backend came back: %v", err)
		}
	}
	o.Release()
}
