package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"

	"github.com/stratafs/strata/backend"
)

// ReadRange streams n bytes of key from off. With a version, the read is
// pinned to that generation (the generation= parameter, on every
// re-request the library makes after a broken connection too); without
// one, to the generation of the first response. Bytes of two generations
// never mix. A pinned generation that no longer exists, at open or when a
// broken body is re-requested, is:
//   - ErrVersionChanged when key now has another generation (replaced),
//   - ErrNotExist when key has no live generation (deleted).
//
// On a bucket with object versioning, a replaced generation stays
// readable and the read succeeds with its bytes, which is still exactly
// the version asked for.
//
// Stored bytes are returned as stored: an object uploaded with
// Content-Encoding gzip is not decompressed, so offsets and sizes match
// Stat. A body that ends early is io.ErrUnexpectedEOF, one that delivers
// nothing for StallTimeout is ErrUnavailable. A whole-object read is
// checked against the object's CRC32C.
func (b *Backend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("gcs: read %s: invalid range off=%d n=%d", key, off, n)
	}
	// Stored bytes, never decompressed: the library's header on XML
	// reads, storedBytes's on JSON reads (the library refuses it there).
	obj := b.bucket.Object(key).ReadCompressed(!b.jsonReads)
	gen := int64(-1)
	if version != "" {
		g, err := parseGeneration(version)
		if err != nil {
			return nil, fmt.Errorf("gcs: read %s: %w: %w", key, backend.ErrVersionChanged, err)
		}
		gen = g
		obj = obj.Generation(gen)
	}
	if gen < 0 && b.jsonReads {
		// JSON reads learn the generation from a response header that
		// emulators may leave out, and a re-request after a broken body
		// would then be unpinned: pin the read to the live generation.
		st, err := b.Stat(ctx, key)
		if err != nil {
			return nil, err
		}
		if gen, err = parseGeneration(st.Version); err != nil {
			return nil, fmt.Errorf("gcs: read %s: %w", key, err)
		}
		obj = obj.Generation(gen)
	}
	rctx, cancel := context.WithCancel(ctx)
	r, err := obj.NewRangeReader(rctx, off, n)
	if err != nil {
		cancel()
		return nil, b.readErr(ctx, key, gen, err)
	}
	if gen < 0 {
		// Unpinned: the library pins every re-request to the generation
		// of the first response; a 404 later on means that one is gone.
		gen = r.Attrs.Generation
	}
	rr := &rangeReader{b: b, ctx: ctx, key: key, gen: gen, r: r, cancel: cancel, remain: n, want: n}
	rr.guard = newStallGuard(b.opt.StallTimeout, cancel)
	return rr, nil
}

// parseGeneration turns a Version back into a generation.
func parseGeneration(version string) (int64, error) {
	g, err := strconv.ParseInt(version, 10, 64)
	if err != nil || g <= 0 {
		return 0, fmt.Errorf("version %q is not a GCS generation", version)
	}
	return g, nil
}

// readErr maps a read failure. A 404 on a pinned generation is resolved
// with a Stat: another live generation means the object was replaced.
func (b *Backend) readErr(ctx context.Context, key string, gen int64, err error) error {
	if gen > 0 && errors.Is(err, storage.ErrObjectNotExist) && ctx.Err() == nil {
		if cur, serr := b.Stat(ctx, key); serr == nil {
			if cur.Version != strconv.FormatInt(gen, 10) {
				return fmt.Errorf("gcs: read %s: %w: generation %d is gone, current is %s",
					key, backend.ErrVersionChanged, gen, cur.Version)
			}
		} else if !errors.Is(serr, backend.ErrNotExist) {
			return wrap(ctx, "read", key, err)
		}
		return fmt.Errorf("gcs: read %s: %w: generation %d was deleted: %w", key, backend.ErrNotExist, gen, err)
	}
	return wrap(ctx, "read", key, err)
}

// rangeReader enforces the contract on top of the library's reader:
// exactly want bytes, a stall guard, and errors mapped to sentinels.
// Read is for one goroutine at a time; Close may come from another one
// to abort a Read that waits on the network.
type rangeReader struct {
	b      *Backend
	ctx    context.Context // the caller's
	key    string
	gen    int64
	r      *storage.Reader
	cancel context.CancelFunc
	guard  *stallGuard
	remain int64
	want   int64
	err    error // sticky
	closed bool
}

func (rr *rangeReader) Read(p []byte) (int, error) {
	if rr.err != nil {
		return 0, rr.err
	}
	if rr.remain == 0 {
		// Read once past the end: the library checks a whole-object read's
		// CRC32C when it sees EOF, and a server sending more than asked
		// for shows up here.
		var one [1]byte
		rr.guard.arm()
		m, err := rr.r.Read(one[:])
		stalled := rr.guard.disarm()
		switch {
		case stalled:
			return 0, rr.fail(errStalled)
		case m > 0:
			return 0, rr.fail(fmt.Errorf("%w: server sent more than the %d bytes asked for", backend.ErrUnavailable, rr.want))
		case err == nil || err == io.EOF:
			rr.err = io.EOF
			return 0, io.EOF
		default:
			return 0, rr.fail(err)
		}
	}
	if int64(len(p)) > rr.remain {
		p = p[:rr.remain]
	}
	rr.guard.arm()
	m, err := rr.r.Read(p)
	stalled := rr.guard.disarm()
	rr.remain -= int64(m)
	switch {
	case stalled:
		return m, rr.fail(errStalled)
	case err == nil:
		return m, nil
	case err == io.EOF && rr.remain > 0:
		return m, rr.fail(fmt.Errorf("body ended after %d of %d bytes: %w", rr.want-rr.remain, rr.want, io.ErrUnexpectedEOF))
	case err == io.EOF:
		return m, nil // the next Read confirms the end
	default:
		return m, rr.fail(err)
	}
}

// fail records err (mapped) as the reader's final error.
func (rr *rangeReader) fail(err error) error {
	if errors.Is(err, errStalled) {
		err = fmt.Errorf("%w (%v at offset %d of %d)", errStalled, rr.b.opt.StallTimeout, rr.want-rr.remain, rr.want)
	}
	rr.err = rr.b.readErr(rr.ctx, rr.key, rr.gen, err)
	rr.cancel()
	return rr.err
}

// Close releases the connection. It reports nothing Read has not.
func (rr *rangeReader) Close() error {
	if rr.closed {
		return nil
	}
	rr.closed = true
	rr.guard.disarm()
	rr.cancel()
	_ = rr.r.Close() // after cancel it only repeats the cancellation
	return nil
}

// stallGuard cancels a read whose current Read call has delivered nothing
// for d. It is armed only inside Read: a caller that pauses between reads
// is not stalled.
type stallGuard struct {
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

func newStallGuard(d time.Duration, cancel context.CancelFunc) *stallGuard {
	g := &stallGuard{d: d}
	g.t = time.AfterFunc(d, func() {
		g.fired.Store(true)
		cancel()
	})
	g.t.Stop()
	return g
}

func (g *stallGuard) arm() { g.t.Reset(g.d) }

// disarm stops the timer and reports whether it fired.
func (g *stallGuard) disarm() bool {
	g.t.Stop()
	return g.fired.Load()
}
