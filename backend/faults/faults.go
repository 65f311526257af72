package faults

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratafs/strata/backend"
)

// ErrInjected is wrapped by every error this package injects.
var ErrInjected = errors.New("faults: injected")

// Op names an operation of the wrapped backend.
type Op string

// The operations faults can be injected into.
const (
	OpStat   Op = "stat"
	OpList   Op = "list"
	OpRead   Op = "read" // ReadRange
	OpPut    Op = "put"
	OpCopy   Op = "copy"
	OpDelete Op = "delete"
	OpCheck  Op = "check"
)

// Call describes one call, as hooks see it.
type Call struct {
	Op Op
	// Key is the key (the prefix for List, the source for Copy).
	Key string
	// Dst is Copy's destination.
	Dst string
	// Version is ReadRange's version, Copy's source version, Put's
	// IfVersion, or List's token.
	Version string
	// Off and N are ReadRange's range; N is the size for Put.
	Off, N int64
	// Occurrence counts the calls identical to this one so far: 1 for the
	// first. A retry of a failed call has Occurrence 2.
	Occurrence uint64
}

// Fault is what happens to one call. The zero Fault is no fault.
type Fault struct {
	// Delay is waited (honouring ctx) before the call.
	Delay time.Duration
	// Err is returned instead of calling the inner backend.
	Err error
	// BodyErr, for ReadRange, makes the body return BodyErr once BodyAfter
	// bytes have been read. io.EOF simulates a backend that silently
	// returns a short body.
	BodyErr   error
	BodyAfter int64
}

// Hook decides a fault for one call. It runs after the random draws and
// its non-zero fields replace theirs. Hooks must be safe for concurrent use.
type Hook func(ctx context.Context, c Call) Fault

// Options configure the injected faults.
type Options struct {
	// Seed makes the random faults reproducible.
	Seed uint64
	// Latency is added to every call, plus a uniform draw in [0, Jitter).
	Latency, Jitter time.Duration
	// FailureRate is the probability that a call fails, before reaching
	// the inner backend, with an error wrapping backend.ErrUnavailable.
	FailureRate float64
	// ResetRate is the probability that a ReadRange body fails like a
	// reset connection (ErrUnavailable, ECONNRESET) after a random number
	// of bytes; TruncateRate that it fails with io.ErrUnexpectedEOF.
	ResetRate, TruncateRate float64
	// Ops limits the random faults (latency included) to these
	// operations; nil means all. Hooks apply regardless.
	Ops []Op
	// Hooks decide faults per operation.
	Hooks map[Op]Hook
}

// DefaultOptions injects nothing: a transparent wrapper.
func DefaultOptions() Options { return Options{} }

// Stats counts what was injected.
type Stats struct {
	Calls       int64 // calls made through the wrapper
	Delays      int64 // calls delayed
	Failures    int64 // calls failed with an injected error
	Resets      int64 // bodies reset
	Truncations int64 // bodies truncated (or ended with a hook's BodyErr)
}

// Backend is the wrapper.
type Backend struct {
	inner backend.Backend

	mu  sync.RWMutex // guards opt
	opt Options

	seqMu sync.Mutex // guards seq
	seq   map[uint64]uint64

	calls, delays, failures, resets, truncations atomic.Int64
}

// maxTracked bounds the occurrence map; past it the counts start over.
const maxTracked = 1 << 20

// New wraps inner.
func New(inner backend.Backend, opt Options) *Backend {
	return &Backend{inner: inner, opt: cloneOptions(opt), seq: map[uint64]uint64{}}
}

func cloneOptions(o Options) Options {
	o.Ops = slices.Clone(o.Ops)
	hooks := make(map[Op]Hook, len(o.Hooks))
	for k, v := range o.Hooks {
		hooks[k] = v
	}
	o.Hooks = hooks
	return o
}

// Update changes the options of a live wrapper (say, start an outage and
// end it); calls already past their fault decision are unaffected.
func (b *Backend) Update(f func(*Options)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := cloneOptions(b.opt)
	f(&o)
	b.opt = o
}

// SetHook installs (or, with nil, removes) the hook of one operation.
func (b *Backend) SetHook(op Op, h Hook) {
	b.Update(func(o *Options) {
		if h == nil {
			delete(o.Hooks, op)
		} else {
			o.Hooks[op] = h
		}
	})
}

// Stats returns the counters.
func (b *Backend) Stats() Stats {
	return Stats{
		Calls:       b.calls.Load(),
		Delays:      b.delays.Load(),
		Failures:    b.failures.Load(),
		Resets:      b.resets.Load(),
		Truncations: b.truncations.Load(),
	}
}

// Inner returns the wrapped backend.
func (b *Backend) Inner() backend.Backend { return b.inner }

// decide draws the random faults of c, then applies its hook.
func (b *Backend) decide(ctx context.Context, c *Call) Fault {
	b.mu.RLock()
	opt := b.opt // Ops and Hooks are never modified in place
	b.mu.RUnlock()
	h := callHash(opt.Seed, c)
	b.seqMu.Lock()
	if len(b.seq) >= maxTracked {
		clear(b.seq)
	}
	b.seq[h]++
	c.Occurrence = b.seq[h]
	b.seqMu.Unlock()
	r := rng{state: h ^ c.Occurrence*0x9e3779b97f4a7c15}

	var f Fault
	if opt.Ops == nil || slices.Contains(opt.Ops, c.Op) {
		f.Delay = opt.Latency
		if opt.Jitter > 0 {
			f.Delay += time.Duration(r.float() * float64(opt.Jitter))
		}
		if r.float() < opt.FailureRate {
			f.Err = fmt.Errorf("faults: %s %s: injected failure: %w: %w", c.Op, c.Key, backend.ErrUnavailable, ErrInjected)
		}
		if c.Op == OpRead && c.N > 0 {
			after := int64(r.float() * float64(c.N))
			switch reset, trunc := r.float(), r.float(); {
			case reset < opt.ResetRate:
				f.BodyErr, f.BodyAfter = ResetError(c.Key, after), after
			case trunc < opt.TruncateRate:
				f.BodyErr, f.BodyAfter = TruncateError(c.Key, after), after
			}
		}
	}
	if hook := opt.Hooks[c.Op]; hook != nil {
		hf := hook(ctx, *c)
		if hf.Delay != 0 {
			f.Delay = hf.Delay
		}
		if hf.Err != nil {
			f.Err = hf.Err
		}
		if hf.BodyErr != nil {
			f.BodyErr, f.BodyAfter = hf.BodyErr, hf.BodyAfter
		}
	}
	return f
}

// before runs the fault of a call up to the call itself: the delay, then
// the injected error, if any.
func (b *Backend) before(ctx context.Context, c Call) (Fault, error) {
	b.calls.Add(1)
	f := b.decide(ctx, &c)
	if f.Delay > 0 {
		b.delays.Add(1)
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return f, fmt.Errorf("faults: %s %s: %w", c.Op, c.Key, ctx.Err())
		}
	}
	if f.Err != nil {
		b.failures.Add(1)
		return f, f.Err
	}
	return f, nil
}

// ResetError is the error of a body reset after n bytes: it wraps
// backend.ErrUnavailable, syscall.ECONNRESET and ErrInjected.
func ResetError(key string, n int64) error {
	return fmt.Errorf("faults: read %s: connection reset after %d bytes: %w: %w: %w",
		key, n, backend.ErrUnavailable, syscall.ECONNRESET, ErrInjected)
}

// TruncateError is the error of a body cut short after n bytes: it wraps
// io.ErrUnexpectedEOF and ErrInjected.
func TruncateError(key string, n int64) error {
	return fmt.Errorf("faults: read %s: body truncated after %d bytes: %w: %w", key, n, io.ErrUnexpectedEOF, ErrInjected)
}

// callHash mixes the seed and the identity of a call.
func callHash(seed uint64, c *Call) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00%d", c.Op, c.Key, c.Dst, c.Version, c.Off, c.N)
	return splitmix(h.Sum64() ^ splitmix(seed))
}

// rng is splitmix64: small, fast and good enough for fault draws.
type rng struct{ state uint64 }

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// float returns a uniform draw in [0, 1).
func (r *rng) float() float64 {
	r.state = splitmix(r.state)
	return float64(r.state>>11) / (1 << 53)
}

// isReset reports whether a body error is a (simulated) connection reset.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
