package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/backendtest"
	"github.com/stratafs/strata/backend/local"
)

func newLocal(t *testing.T) *local.Backend {
	t.Helper()
	b, err := local.New(t.TempDir(), local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readOnly hides the optional interfaces of a backend.
type readOnly struct{ backend.Backend }

func TestConformancePassThrough(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"NoFaults", DefaultOptions()},
		{"Latency", Options{Seed: 1, Latency: 100 * time.Microsecond, Jitter: time.Millisecond}},
		// Faults confined to operations the suite does not call.
		{"FaultsElsewhere", Options{Seed: 1, FailureRate: 1, Ops: []Op{OpCheck}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.Run(t, backendtest.Harness{
				New:      func(t *testing.T) backend.Backend { return New(newLocal(t), tc.opt).Backend() },
				Caps:     backendtest.Caps{LongKeys: true},
				Parallel: true,
			})
		})
	}
}

func TestConformanceReadOnlyInner(t *testing.T) {
	var inners sync.Map // the wrapper's Backend() -> its inner *local.Backend
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			l := newLocal(t)
			b := New(readOnly{l}, DefaultOptions()).Backend()
			inners.Store(b, l)
			return b
		},
		Seed: func(t *testing.T, b backend.Backend, key string, data []byte) {
			inner, _ := inners.Load(b)
			if _, err := inner.(*local.Backend).Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		Caps:     backendtest.Caps{LongKeys: true},
		Parallel: true,
		ReadOnly: true,
	})
}

// The wrapper claims no optional interface its inner backend lacks, and
// keeps every one it has.
func TestOptionalInterfacesFollowInner(t *testing.T) {
	l := newLocal(t)
	for _, tc := range []struct {
		name  string
		inner backend.Backend
		want  bool
	}{
		{"read only", readOnly{l}, false},
		{"local", l, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.inner, DefaultOptions()).Backend()
			_, c := b.(backend.Checker)
			_, w := b.(backend.Writer)
			_, cp := b.(backend.Copier)
			_, d := b.(backend.Deleter)
			if c != tc.want || w != tc.want || cp != tc.want || d != tc.want {
				t.Errorf("checker=%v writer=%v copier=%v deleter=%v, want all %v", c, w, cp, d, tc.want)
			}
			if _, ok := b.(backend.Closer); !ok {
				t.Error("not a Closer")
			}
		})
	}
}

// outcomes stats n keys and records which failed.
func outcomes(b *Backend, keys []string, concurrent bool) map[string]bool {
	failed := make(map[string]bool, len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range keys {
		run := func(k string) {
			_, err := b.Stat(context.Background(), k)
			mu.Lock()
			failed[k] = errors.Is(err, ErrInjected)
			mu.Unlock()
		}
		if concurrent {
			wg.Add(1)
			go func() { defer wg.Done(); run(k) }()
		} else {
			run(k)
		}
	}
	wg.Wait()
	return failed
}

func TestDeterministic(t *testing.T) {
	inner := newLocal(t)
	var keys []string
	for i := 0; i < 200; i++ {
		keys = append(keys, fmt.Sprintf("k%03d", i))
	}
	opt := Options{Seed: 42, FailureRate: 0.3}
	seq := outcomes(New(inner, opt), keys, false)
	conc := outcomes(New(inner, opt), keys, true)
	n := 0
	for _, k := range keys {
		if seq[k] != conc[k] {
			t.Fatalf("key %s: failed=%v in order, %v concurrently; same seed must give the same faults", k, seq[k], conc[k])
		}
		if seq[k] {
			n++
		}
	}
	if n < 30 || n > 90 {
		t.Errorf("%d of 200 calls failed at rate 0.3", n)
	}
	opt.Seed = 43
	other := outcomes(New(inner, opt), keys, false)
	same := 0
	for _, k := range keys {
		if other[k] == seq[k] {
			same++
		}
	}
	if same == len(keys) {
		t.Error("another seed gave exactly the same faults")
	}
	// A retry of the same call is a new draw: at rate 0.5, some call that
	// failed the first time succeeds the second.
	b := New(inner, Options{Seed: 7, FailureRate: 0.5})
	first := outcomes(b, keys, false)
	second := outcomes(b, keys, false)
	recovered := 0
	for _, k := range keys {
		if first[k] && !second[k] {
			recovered++
		}
	}
	if recovered == 0 {
		t.Error("no failed call succeeded when retried")
	}
}

func TestFailures(t *testing.T) {
	inner := newLocal(t)
	ctx := context.Background()
	if _, err := inner.Put(ctx, "k", strings.NewReader("data"), 4, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	b := New(inner, Options{FailureRate: 1, Ops: []Op{OpStat, OpPut}})
	_, err := b.Stat(ctx, "k")
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, ErrInjected) {
		t.Fatalf("Stat: %v, want an injected ErrUnavailable", err)
	}
	if _, err := b.Backend().(backend.Writer).Put(ctx, "new", strings.NewReader("x"), 1, backend.PutOptions{}); !errors.Is(err, ErrInjected) {
		t.Fatalf("Put: %v", err)
	}
	if _, err := inner.Stat(ctx, "new"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("a failed Put reached the inner backend: %v", err)
	}
	if _, err := b.List(ctx, "", backend.ListOptions{}); err != nil {
		t.Fatalf("List is not in Ops but failed: %v", err)
	}
	b.Update(func(o *Options) { o.FailureRate = 0 })
	if _, err := b.Stat(ctx, "k"); err != nil {
		t.Fatalf("after the outage ended: %v", err)
	}
	if s := b.Stats(); s.Calls != 4 || s.Failures != 2 {
		t.Errorf("stats %+v, want 4 calls, 2 failures", s)
	}
}

func TestBodies(t *testing.T) {
	inner := newLocal(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 10000)
	if _, err := inner.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		opt   Options
		want  []error
		count func(Stats) int64
	}{
		{"Reset", Options{Seed: 3, ResetRate: 1}, []error{backend.ErrUnavailable, syscall.ECONNRESET, ErrInjected}, func(s Stats) int64 { return s.Resets }},
		{"Truncate", Options{Seed: 3, TruncateRate: 1}, []error{io.ErrUnexpectedEOF, ErrInjected}, func(s Stats) int64 { return s.Truncations }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(inner, c.opt)
			for i := 0; i < 5; i++ {
				rc, err := b.ReadRange(ctx, "k", "", 100, int64(len(data))-200)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				for _, w := range c.want {
					if !errors.Is(err, w) {
						t.Fatalf("body error %v does not wrap %v", err, w)
					}
				}
				if len(got) >= len(data)-200 || !bytes.Equal(got, data[100:100+len(got)]) {
					t.Fatalf("got %d bytes before the fault; want a correct, shorter prefix", len(got))
				}
			}
			if n := c.count(b.Stats()); n != 5 {
				t.Errorf("counter = %d, want 5", n)
			}
		})
	}
}

func TestHooks(t *testing.T) {
	inner := newLocal(t)
	ctx := context.Background()
	data := []byte("0123456789")
	info, err := inner.Put(ctx, "k", bytes.NewReader(data), 10, backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	custom := errors.New("custom")
	var seen []Call
	var mu sync.Mutex
	b := New(inner, Options{Hooks: map[Op]Hook{
		OpStat: func(ctx context.Context, c Call) Fault {
			if c.Key == "fail-me" {
				return Fault{Err: custom}
			}
			return Fault{}
		},
		OpRead: func(ctx context.Context, c Call) Fault {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
			return Fault{BodyErr: io.EOF, BodyAfter: 3} // a silently short body
		},
	}})
	if _, err := b.Stat(ctx, "fail-me"); !errors.Is(err, custom) {
		t.Errorf("hooked Stat: %v", err)
	}
	if _, err := b.Stat(ctx, "k"); err != nil {
		t.Errorf("unhooked key: %v", err)
	}
	for i := 0; i < 2; i++ {
		rc, err := b.ReadRange(ctx, "k", info.Version, 2, 6)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != "234" {
			t.Fatalf("hooked body: %q, %v; want exactly 3 bytes then a silent EOF", got, err)
		}
	}
	want := Call{Op: OpRead, Key: "k", Version: info.Version, Off: 2, N: 6, Occurrence: 1}
	if len(seen) != 2 || seen[0] != want || seen[1].Occurrence != 2 {
		t.Errorf("hook saw %+v, want %+v then occurrence 2", seen, want)
	}
	b.SetHook(OpStat, nil)
	if _, err := b.Stat(ctx, "fail-me"); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("after removing the hook: %v", err)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	inner := newLocal(t)
	var calls int
	b := New(inner, Options{Latency: time.Hour, Hooks: map[Op]Hook{
		OpStat: func(context.Context, Call) Fault { calls++; return Fault{} },
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := b.Stat(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stat during a 1h injected latency with a 10ms deadline: %v", err)
	}
	if s := b.Stats(); s.Delays != 1 || calls != 1 {
		t.Errorf("stats %+v, hook calls %d", s, calls)
	}
}

func TestConcurrentUse(t *testing.T) {
	inner := newLocal(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 4096)
	for i := 0; i < 8; i++ {
		if _, err := inner.Put(ctx, fmt.Sprintf("k%d", i), bytes.NewReader(data), 4096, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b := New(inner, Options{Seed: 9, Jitter: 100 * time.Microsecond, FailureRate: 0.2, ResetRate: 0.2, TruncateRate: 0.2})
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				key := fmt.Sprintf("k%d", (g+i)%8)
				// Errors are the faults injected: Stats counts them.
				if rc, err := b.ReadRange(ctx, key, "", 0, 4096); err == nil {
					_, _ = io.Copy(io.Discard, rc)
					rc.Close()
				}
				_, _ = b.Stat(ctx, key)
				if i == 10 && g == 0 {
					b.Update(func(o *Options) { o.FailureRate = 0.5 })
				}
			}
		}(g)
	}
	wg.Wait()
	s := b.Stats()
	if s.Calls != 32*20*2 || s.Failures == 0 || s.Resets == 0 || s.Truncations == 0 || s.Failures+s.Resets+s.Truncations > s.Calls {
		t.Fatalf("stats %+v", s)
	}
}
