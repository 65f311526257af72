package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/strata/backend"
)

// trimETag turns a quoted ETag into a Version.
func trimETag(etag *string) string {
	return strings.Trim(aws.ToString(etag), `"`)
}

// quote turns a Version back into an ETag for If-Match headers.
func quote(version string) *string { return aws.String(`"` + version + `"`) }

// Stat returns the current version of key (HeadObject).
func (b *Backend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	return b.head(ctx, "stat", key, "")
}

// head is HeadObject, optionally pinned to a version (412 is then
// ErrVersionChanged).
func (b *Backend) head(ctx context.Context, op, key, version string) (backend.ObjectInfo, error) {
	if key == "" {
		return backend.ObjectInfo{}, fmt.Errorf("s3: %s: empty key: %w", op, backend.ErrNotExist)
	}
	in := &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key}
	if version != "" {
		in.IfMatch = quote(version)
	}
	out, err := b.client.HeadObject(ctx, in, b.lookupTimeout())
	if err != nil {
		return backend.ObjectInfo{}, mapErrAs(op, key, err, backend.ErrPreconditionFailed, backend.ErrVersionChanged)
	}
	return backend.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		MTime:   aws.ToTime(out.LastModified),
		Version: trimETag(out.ETag),
	}, nil
}

func (b *Backend) metaTimeout() func(*s3.Options) {
	return withTimeout(b.opt.RequestTimeout, false, true)
}
func (b *Backend) xferTimeout() func(*s3.Options) {
	return withTimeout(b.opt.TransferTimeout, false, true)
}

// sendStall bounds an attempt of a request carrying data by its progress.
func (b *Backend) sendStall() func(*s3.Options) { return withSendStall(b.opt.SendStallTimeout) }
func (b *Backend) getTimeout() func(*s3.Options) {
	if b.opt.ResponseTimeout > 0 {
		return withTimeout(b.opt.ResponseTimeout, true, false)
	}
	return withTimeout(b.opt.RequestTimeout, true, false)
}

// lookupTimeout bounds one attempt of a HEAD or a one-key LIST (what a
// lookup sends): answered as fast as a GET's headers, so they get its
// ResponseTimeout, and a request lost on a network that went silent is
// retried in seconds rather than after RequestTimeout. A mount bounds the
// whole lookup at 8 s (cache/meta), which holds two such attempts.
func (b *Backend) lookupTimeout() func(*s3.Options) {
	if b.opt.ResponseTimeout > 0 {
		return withTimeout(b.opt.ResponseTimeout, false, false)
	}
	return b.metaTimeout()
}

// ReadRange streams [off, off+n) of key with a ranged GET carrying
// If-Match (a 412 is ErrVersionChanged). The body is watched for stalls,
// resumed from where it broke (pinned to the ETag first seen) up to
// ReadResumes times, and a body that ends early is an error.
func (b *Backend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("s3: get %s: invalid range off %d n %d", key, off, n)
	}
	if n == 0 {
		// No bytes, but existence, version and bounds still hold.
		info, err := b.head(ctx, "get", key, version)
		if err != nil {
			return nil, err
		}
		if off > info.Size {
			return nil, fmt.Errorf("s3: get %s: offset %d past the end (%d bytes): %w", key, off, info.Size, io.ErrUnexpectedEOF)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	r := &bodyReader{ctx: ctx, b: b, key: key, etag: version, start: off, pos: off, end: off + n}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// bodyReader is one ranged read, possibly over several GETs.
type bodyReader struct {
	ctx     context.Context
	b       *Backend
	key     string
	etag    string // pinned version; set from the first response if ""
	start   int64  // first byte of the range
	pos     int64  // next byte to return
	end     int64
	resumes int

	body    io.ReadCloser
	cancel  context.CancelFunc // of the current GET
	timer   *time.Timer        // stall guard of the current GET
	stalled *atomic.Bool       // set by timer when it fired
	err     error              // sticky
}

// open issues a GET for [pos, end).
func (r *bodyReader) open() error {
	gctx, cancel := context.WithCancel(r.ctx)
	in := &s3.GetObjectInput{
		Bucket: &r.b.bucket,
		Key:    &r.key,
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", r.pos, r.end-1)),
	}
	if r.etag != "" {
		in.IfMatch = quote(r.etag)
	}
	out, err := r.b.client.GetObject(gctx, in, r.b.getTimeout())
	if err != nil {
		cancel()
		if errorCode(err) == "InvalidRange" || httpStatus(err) == 416 {
			return fmt.Errorf("s3: get %s: range [%d, %d) past the end of the object: %w: %w",
				r.key, r.pos, r.end, io.ErrUnexpectedEOF, err)
		}
		return mapErrAs("get", r.key, err, backend.ErrPreconditionFailed, backend.ErrVersionChanged)
	}
	if err := r.validate(out); err != nil {
		out.Body.Close()
		cancel()
		return err
	}
	stalled := new(atomic.Bool)
	r.body, r.cancel, r.stalled = out.Body, cancel, stalled
	r.timer = time.AfterFunc(time.Hour, func() { stalled.Store(true); cancel() })
	r.timer.Stop()
	return nil
}

// validate checks that the response is the range and version asked for.
func (r *bodyReader) validate(out *s3.GetObjectOutput) error {
	etag := trimETag(out.ETag)
	if r.etag == "" {
		r.etag = etag // later resumes must read the same version
	} else if etag != "" && etag != r.etag {
		return fmt.Errorf("s3: get %s: got version %s, want %s: %w", r.key, etag, r.etag, backend.ErrVersionChanged)
	}
	cr := aws.ToString(out.ContentRange)
	if cr == "" {
		// A 200 with the whole object: only acceptable from byte 0.
		if r.pos != 0 {
			return fmt.Errorf("s3: get %s: server ignored the Range header: %w", r.key, backend.ErrUnavailable)
		}
		if l := aws.ToInt64(out.ContentLength); l < r.end {
			return fmt.Errorf("s3: get %s: object has %d bytes, range ends at %d: %w", r.key, l, r.end, io.ErrUnexpectedEOF)
		}
		return nil
	}
	first, last, err := parseContentRange(cr)
	if err != nil {
		return fmt.Errorf("s3: get %s: %w", r.key, err)
	}
	if first != r.pos {
		return fmt.Errorf("s3: get %s: asked for bytes from %d, got %q: %w", r.key, r.pos, cr, backend.ErrUnavailable)
	}
	if last < r.end-1 {
		return fmt.Errorf("s3: get %s: range [%d, %d) ends past the object (%q): %w", r.key, r.pos, r.end, cr, io.ErrUnexpectedEOF)
	}
	return nil
}

// parseContentRange parses "bytes first-last/total".
func parseContentRange(cr string) (first, last int64, err error) {
	spec, ok := strings.CutPrefix(cr, "bytes ")
	if ok {
		spec, _, ok = strings.Cut(spec, "/")
	}
	var a, z string
	if ok {
		a, z, ok = strings.Cut(spec, "-")
	}
	if ok {
		if first, err = strconv.ParseInt(a, 10, 64); err == nil {
			last, err = strconv.ParseInt(z, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("malformed Content-Range %q", cr)
	}
	return first, last, nil
}

func (r *bodyReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.pos >= r.end {
		return 0, io.EOF
	}
	if rem := r.end - r.pos; int64(len(p)) > rem {
		p = p[:rem]
	}
	r.timer.Reset(r.b.opt.ReadStallTimeout)
	n, err := r.body.Read(p)
	r.timer.Stop()
	r.pos += int64(n)
	if err == nil || (err == io.EOF && r.pos == r.end) {
		return n, nil
	}
	if r.pos == r.end {
		return n, nil // done; whatever the body says next is irrelevant
	}
	// The body broke (or ended early) before the range was complete.
	if cerr := r.ctx.Err(); cerr != nil {
		r.fail(fmt.Errorf("s3: get %s: %w", r.key, cerr))
		return n, r.err
	}
	cause := err
	switch {
	case r.stalled.Load():
		cause = fmt.Errorf("no data for %s: %w", r.b.opt.ReadStallTimeout, err)
	case errors.Is(err, io.EOF):
		cause = fmt.Errorf("body ended early: %w", io.ErrUnexpectedEOF)
	}
	r.closeBody()
	if r.resumes >= r.b.opt.ReadResumes {
		r.fail(fmt.Errorf("s3: get %s: body broken at byte %d of [%d, %d) after %d resumes: %w: %w",
			r.key, r.pos, r.start, r.end, r.resumes, backend.ErrUnavailable, cause))
		return n, r.err
	}
	r.resumes++
	if oerr := r.open(); oerr != nil {
		r.fail(oerr)
		return n, r.err
	}
	return n, nil
}

func (r *bodyReader) fail(err error) {
	r.err = err
	r.closeBody()
}

func (r *bodyReader) closeBody() {
	if r.body != nil {
		r.timer.Stop()
		r.body.Close()
		r.cancel()
		r.body = nil
	}
}

func (r *bodyReader) Close() error {
	r.closeBody()
	if r.err == nil {
		r.err = errors.New("s3: read on a closed body")
	}
	return nil
}
