package shared

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

var (
	errClosed  = errors.New("shared: read on a closed reader")
	errSkipped = errors.New("shared: tier not consulted (breaker open)")
)

// segment is the records of blocks [from, to] of one group, looked up with
// one ranged GET.
type segment struct {
	group    int64
	from, to int64
	probe    bool
	launched bool
	done     chan struct{} // closed when the lookup has an answer
	body     io.ReadCloser // the records, while the lookup hit and reads went well
	err      error         // why there is no body
	cancel   context.CancelFunc
	timer    *time.Timer // bounds the headers, then each record (cancels the GET)
	timedOut atomic.Bool
	dropped  atomic.Bool // cancelled by the reader, which gave up the tier
}

// reader serves one ReadRange: blocks [first, end) of one object version.
// It is used by one goroutine; lookups answer through segment.done.
type reader struct {
	t            *Tier
	ctx          context.Context
	key, version string
	id           ID
	first, end   int64 // blocks
	lastLen      int64 // length of block end-1
	probe        bool

	segs []*segment
	next int // segments [0, next) are launched

	cur    int64         // block being delivered
	off    int64         // bytes of it delivered
	buf    []byte        // a checked tier block being copied out in pieces
	org    io.ReadCloser // origin GET covering blocks [cur, orgEnd)
	orgEnd int64
	wbuf   []byte // copy of origin block cur for the writer
	wtried bool   // wbuf was asked for, for block cur
	noTier bool   // the tier failed during this read: the rest comes from the origin
	err    error  // sticky
	closed bool
}

func newReader(ctx context.Context, t *Tier, key, version string, off, n int64, probe bool) *reader {
	l := t.layout
	r := &reader{t: t, ctx: ctx, key: key, version: version, id: Identity(t.source, key, version), probe: probe}
	r.first, r.end = off/l.BlockSize, (off+n+l.BlockSize-1)/l.BlockSize
	r.lastLen = off + n - (r.end-1)*l.BlockSize
	r.cur = r.first
	for b := r.first; b < r.end; {
		g := l.Group(b)
		to := min(l.FirstBlock(g+1), r.end) - 1
		r.segs = append(r.segs, &segment{group: g, from: b, to: to, done: make(chan struct{})})
		b = to + 1
	}
	r.segs[0].probe = probe
	return r
}

func (r *reader) blockLen(b int64) int64 {
	if b == r.end-1 {
		return r.lastLen
	}
	return r.t.layout.BlockSize
}

// start launches the first lookups and, if the first block is a miss,
// opens the origin, so that origin errors come back from ReadRange.
func (r *reader) start() error {
	r.fill()
	s := r.segs[0]
	<-s.done
	if s.body == nil {
		return r.openRun()
	}
	return nil
}

// fill keeps up to Lookahead segments from the current one launched.
func (r *reader) fill() {
	cur := r.segIndex(r.cur)
	for r.next < len(r.segs) && r.next < cur+r.t.opts.Lookahead {
		r.launch(r.segs[r.next])
		r.next++
	}
}

func (r *reader) segIndex(b int64) int {
	l := r.t.layout
	return int(l.Group(b) - l.Group(r.first))
}

// Read implements io.Reader.
func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		switch {
		case r.cur >= r.end:
			return 0, io.EOF
		case r.buf != nil:
			n := copy(p, r.buf[r.off:])
			r.off += int64(n)
			if r.off == int64(len(r.buf)) {
				r.t.putBuf(r.buf)
				r.buf = nil
				r.advance()
			}
			return n, nil
		case r.org != nil && r.cur < r.orgEnd:
			return r.readOrigin(p)
		}
		if n, ok := r.fromTier(p); ok {
			return n, nil
		}
		if err := r.openRun(); err != nil {
			r.err = err
			return 0, err
		}
	}
}

// fromTier reads block cur's record from its segment, if that hit.
func (r *reader) fromTier(p []byte) (int, bool) {
	s := r.segs[r.segIndex(r.cur)]
	if !s.launched {
		r.fill()
	}
	<-s.done
	if s.body == nil {
		return 0, false
	}
	blen := r.blockLen(r.cur)
	direct := int64(len(p)) >= blen
	var dst []byte
	if direct {
		dst = p[:blen] // Read may use all of p as scratch space
	} else {
		dst = r.t.getBuf()[:blen]
	}
	var hdr [HeaderSize]byte
	s.timer.Reset(r.t.opts.Timeout)
	_, err := io.ReadFull(s.body, hdr[:])
	if err == nil {
		_, err = io.ReadFull(s.body, dst)
	}
	fired := !s.timer.Stop() && s.timedOut.Load()
	if err == nil {
		r.t.stats.Shared.Bytes.Add(HeaderSize + blen)
		err = r.t.seal.Check(hdr[:], dst, r.id, r.t.layout, r.cur)
	}
	if err != nil {
		if !direct {
			r.t.putBuf(dst)
		}
		r.recordFailed(s, err, fired)
		return 0, false
	}
	r.t.stats.HitBlocks.Add(1)
	r.t.stats.HitBytes.Add(blen)
	if direct {
		r.advance()
		return int(blen), true
	}
	r.buf, r.off = dst, int64(copy(p, dst))
	return int(r.off), true
}

// openRun opens one origin GET from block cur through every following
// segment already known to be a miss.
func (r *reader) openRun() error {
	i := r.segIndex(r.cur)
	end := r.segs[i].to + 1
	for _, s := range r.segs[i+1:] {
		if !s.launched {
			break
		}
		<-s.done
		if s.body != nil {
			break
		}
		end = s.to + 1
	}
	bs := r.t.layout.BlockSize
	off := r.cur * bs
	n := (end-1)*bs + r.blockLen(end-1) - off
	body, err := r.t.openOrigin(r.ctx, r.key, r.version, off, n)
	if err != nil {
		return err
	}
	r.org, r.orgEnd = body, end
	return nil
}

// readOrigin copies origin bytes of block cur to p (and to the writer's
// copy, when it has one).
func (r *reader) readOrigin(p []byte) (int, error) {
	blen := r.blockLen(r.cur)
	if !r.wtried && r.off == 0 {
		r.wtried, r.wbuf = true, r.t.w.acquire(blen)
	}
	want := min(int64(len(p)), blen-r.off)
	n, err := r.org.Read(p[:want])
	if r.wbuf != nil {
		copy(r.wbuf[r.off:], p[:n])
	}
	r.off += int64(n)
	r.t.stats.Origin.Bytes.Add(int64(n))
	if r.off == blen {
		r.t.stats.MissBlocks.Add(1)
		r.t.stats.MissBytes.Add(blen)
		if r.wbuf != nil {
			r.t.w.add(r.key, r.version, r.id, r.cur, r.wbuf[:blen])
			r.wbuf = nil
		}
		r.advance()
		if err == io.EOF && r.org == nil {
			err = nil // the run ended with its last block
		}
	}
	if err == io.EOF {
		err = fmt.Errorf("shared: origin %s: body ended at block %d: %w", r.key, r.cur, io.ErrUnexpectedEOF)
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

// advance moves to the next block, finishing segments and origin runs
// left behind.
func (r *reader) advance() {
	prev := r.segs[r.segIndex(r.cur)]
	r.cur++
	r.off, r.wtried = 0, false
	if r.org != nil && r.cur >= r.orgEnd {
		r.org.Close()
		r.org = nil
	}
	if r.cur > prev.to {
		if prev.body != nil {
			prev.body.Close()
			prev.body = nil
		}
		if prev.cancel != nil {
			prev.cancel()
		}
		if r.cur < r.end {
			r.fill()
		}
	}
}

// Close releases everything; lookups still out are cancelled and awaited.
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	for _, s := range r.segs[:r.next] {
		if s.cancel != nil {
			s.cancel()
		}
	}
	for _, s := range r.segs[:r.next] {
		<-s.done
		if s.body != nil {
			s.body.Close()
			s.body = nil
		}
	}
	if r.org != nil {
		r.org.Close()
		r.org = nil
	}
	if r.wbuf != nil {
		r.t.w.release(r.wbuf)
		r.t.stats.WritesDropped.Add(1)
		r.wbuf = nil
	}
	if r.buf != nil {
		r.t.putBuf(r.buf)
		r.buf = nil
	}
	if r.err == nil {
		r.err = errClosed
	}
	return nil
}
