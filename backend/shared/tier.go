package shared

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/stratafs/strata/backend"
)

// Tier is the shared cache tier in front of an origin backend. Build it
// with New and hand Backend() to the fetcher. Safe for concurrent use.
type Tier struct {
	origin backend.Backend
	store  Store
	opts   Options
	layout Layout
	keys   Keys
	seal   Sealer
	source string
	log    *slog.Logger
	stats  Stats
	brk    *breaker
	w      *writer   // nil when ReadOnly
	bufs   sync.Pool // block buffers for tier blocks read in pieces

	badMu sync.Mutex // guards logged; a leaf
	// logged holds the shared objects (and error kinds) already logged,
	// so each is logged once; it is emptied when it grows large.
	logged map[string]bool

	closeOnce sync.Once
	closeErr  error
}

// New puts the tier held by store in front of origin.
func New(origin backend.Backend, store Store, opts Options) (*Tier, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	t := &Tier{origin: origin, store: store, opts: opts, source: origin.String(), log: opts.Logger, logged: map[string]bool{}}
	t.layout = NewLayout(opts.BlockSize, opts.GroupSize)
	seal, err := NewSealer(opts.Key)
	if err != nil {
		return nil, err
	}
	t.seal = seal
	t.keys = NewSignedKeys(opts.Prefix, t.source, t.layout, seal)
	t.brk = newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, opts.BreakerMaxCooldown, t.breakerChanged)
	if !opts.ReadOnly {
		t.w = newWriter(t)
	}
	return t, nil
}

func (t *Tier) breakerChanged(open bool, reason error) {
	if open {
		t.stats.BreakerOpen.Store(1)
		t.stats.BreakerTrips.Add(1)
		t.log.Warn("shared: shared cache failing; reading from the origin only for a while", "shared", t.store.String(), "err", reason)
		return
	}
	t.stats.BreakerOpen.Store(0)
	t.log.Info("shared: shared cache back in use", "shared", t.store.String())
}

// Stats returns the live counters.
func (t *Tier) Stats() *Stats { return &t.stats }

// Layout returns how blocks map onto shared objects.
func (t *Tier) Layout() Layout { return t.layout }

// Keys returns the naming of this tier's shared objects.
func (t *Tier) Keys() Keys { return t.keys }

// Backend returns the tier as the backend the fetcher reads from. It also
// implements backend.Writer, Copier and Deleter exactly when the origin
// does, passing them through, so the write path sees the origin's
// abilities unchanged (backend.Compose); and backend.Closer (Close), but
// not Checker: the origin is checked before the tier is put in front.
func (t *Tier) Backend() backend.Backend {
	w, _ := t.origin.(backend.Writer)
	c, _ := t.origin.(backend.Copier)
	d, _ := t.origin.(backend.Deleter)
	return backend.Compose(t, t.origin, backend.Optional{Writer: w, Copier: c, Deleter: d})
}

// MarkDown opens the breaker now, as if the tier had just failed: a mount
// that found the tier unreachable starts on the origin alone and probes
// the tier after the cooldown.
func (t *Tier) MarkDown(err error) { t.brk.trip(err) }

// String names the origin: the tier does not change what the data is, so
// the local cache identity stays the origin's.
func (t *Tier) String() string { return t.source }

// Stat passes through to the origin.
func (t *Tier) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	return t.origin.Stat(ctx, key)
}

// ReadHead passes through to the origin: it answers a lookup, and what it
// read is cached on this node only.
func (t *Tier) ReadHead(ctx context.Context, key string, n int64) (backend.ObjectInfo, []byte, error) {
	return backend.ReadHead(ctx, t.origin, key, n)
}

// List passes through to the origin.
func (t *Tier) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	return t.origin.List(ctx, prefix, opt)
}

// Close drains the background writes (at most DrainTimeout) and closes
// the store and the origin when they are Closers. Later calls do nothing.
func (t *Tier) Close() error {
	t.closeOnce.Do(func() {
		if t.w != nil {
			t.w.close()
		}
		var errs []error
		for _, x := range []any{t.store, t.origin} {
			if c, ok := x.(backend.Closer); ok {
				errs = append(errs, c.Close())
			}
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// ReadRange serves whole blocks from the tier where it has them and from
// the origin otherwise (see the package doc). Reads the tier cannot key
// (no version, not starting on a block) and reads while the breaker is
// open go to the origin directly.
func (t *Tier) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	bs := t.layout.BlockSize
	if version == "" || n <= 0 || off < 0 || off%bs != 0 {
		return t.bypass(ctx, key, version, off, n)
	}
	ok, probe := t.brk.allow()
	if !ok {
		return t.bypass(ctx, key, version, off, n)
	}
	r := newReader(ctx, t, key, version, off, n, probe)
	if err := r.start(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// bypass reads from the origin alone, counting what it serves.
func (t *Tier) bypass(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	body, err := t.openOrigin(ctx, key, version, off, n)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		t.stats.BypassedBlocks.Add((n + t.layout.BlockSize - 1) / t.layout.BlockSize)
	}
	return &countingReader{ReadCloser: body, t: t}, nil
}

// openOrigin sends one origin GET, counting it.
func (t *Tier) openOrigin(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	start := time.Now()
	body, err := t.origin.ReadRange(ctx, key, version, off, n)
	t.stats.Origin.Requests.Add(1)
	t.stats.Origin.Latency.Observe(time.Since(start))
	if err != nil && ctx.Err() == nil {
		t.stats.Origin.Errors.Add(1)
	}
	return body, err
}

type countingReader struct {
	io.ReadCloser
	t *Tier
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.t.stats.Origin.Bytes.Add(int64(n))
	c.t.stats.BypassedBytes.Add(int64(n))
	return n, err
}

func (t *Tier) getBuf() []byte {
	if p, ok := t.bufs.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, t.layout.BlockSize)
}

func (t *Tier) putBuf(b []byte) {
	b = b[:cap(b)]
	t.bufs.Put(&b)
}

// badEntry counts and logs (once per shared object) a record that is not
// what it should be, and has the group rewritten: with one block per
// group the reader's origin fetch does that; larger groups are refetched
// whole in the background.
func (t *Tier) badEntry(r *reader, g int64, name string, err error) {
	t.stats.BadEntries.Add(1)
	if errors.Is(err, ErrForgedRecord) {
		t.stats.ForgedEntries.Add(1)
		t.logOnce("bad:"+name, "shared: refused a shared cache entry whose signature does not verify with this mount's tier key "+
			"(a forged entry, or one written with another key); reading the origin instead", "object", name, "err", err)
	} else {
		t.logOnce("bad:"+name, "shared: ignoring a bad shared cache entry, reading the origin instead", "object", name, "err", err)
	}
	if t.w != nil && t.layout.GroupBlocks > 1 {
		t.w.repair(r.key, r.version, r.id, g)
	}
}

// tierFailed counts a tier request that failed or was too slow.
func (t *Tier) tierFailed(probe bool, name string, err error) {
	t.stats.Shared.Errors.Add(1)
	t.brk.failure(probe, err)
	t.logOnce("fail:"+errorKind(err), "shared: shared cache request failed (further failures of this kind are counted, not logged)",
		"object", name, "err", err)
}

// logOnce logs a warning the first time key is seen.
func (t *Tier) logOnce(key, msg string, args ...any) {
	t.badMu.Lock()
	seen := t.logged[key]
	if !seen {
		if len(t.logged) >= 4096 {
			clear(t.logged)
		}
		t.logged[key] = true
	}
	t.badMu.Unlock()
	if seen {
		t.log.Debug(msg, args...)
		return
	}
	t.log.Warn(msg, args...)
}

// errorKind names the sentinel behind a tier error, for logging once per
// kind.
func errorKind(err error) string {
	for _, s := range []error{backend.ErrAccessDenied, backend.ErrNoBucket, backend.ErrUnavailable,
		backend.ErrNotExist, context.DeadlineExceeded, ErrBadRecord, io.ErrUnexpectedEOF} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other"
}
