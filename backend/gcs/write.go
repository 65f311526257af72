package gcs

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/storage"

	"github.com/stratafs/strata/backend"
)

// Upload chunking. GCS takes an upload in one request or as a resumable
// session of chunks sent one after another (the HTTP API has no parallel
// parts; composing temporary objects would leave them behind on failure).
// Each chunk is buffered in memory so it can be resent.
const (
	chunkQuantum = 256 << 10 // chunks are multiples of 256 KiB
	// Below singleShotMax an object goes in one request with a buffer
	// of its own size.
	singleShotMax = 16 << 20
	// Above it chunks grow with the object (size/32) between these bounds.
	minChunk = 16 << 20
	maxChunk = 64 << 20
	// minThroughput sizes a chunk's transfer timeout: a chunk moving
	// slower than this is treated as stalled and resent.
	minThroughput = 1 << 20 // bytes per second
	copyBufSize   = 256 << 10
)

// chunkSize picks the upload chunk: PutOptions.PartSize when set, else
// the whole object when small, else size/32 within [16 MiB, 64 MiB].
func chunkSize(size, part int64) int64 {
	var c int64
	switch {
	case part > 0:
		c = part
	case size < singleShotMax:
		c = size + 1 // +1: the library must see EOF inside the first chunk
	default:
		c = min(max(size/32, minChunk), maxChunk)
	}
	return (c + chunkQuantum - 1) / chunkQuantum * chunkQuantum
}

// Put uploads size bytes of r as key. The object appears only when the
// upload is finalized: a failed or cancelled Put aborts the session
// before finalization and leaves no object. The library sends the data's
// CRC32C with the final request and GCS refuses a mismatch.
// opt.Concurrency is ignored (see chunkSize).
//
// A failure of the final request is checked against the object before
// it is reported (confirmUpload): a final chunk that timed out and was
// re-sent, whose re-send found the session gone (or, for a conditional
// Put, found the object it had just created) while the first attempt
// went on to finalize, is the success it was.
func (b *Backend) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	if key == "" || size < 0 {
		return backend.ObjectInfo{}, fmt.Errorf("gcs: put %q: invalid key or size %d", key, size)
	}
	obj := b.bucket.Object(key)
	switch opt.IfVersion {
	case "":
	case backend.VersionAbsent:
		obj = obj.If(storage.Conditions{DoesNotExist: true})
	default:
		gen, err := parseGeneration(opt.IfVersion)
		if err != nil {
			return backend.ObjectInfo{}, fmt.Errorf("gcs: put %s: %w: %w", key, backend.ErrPreconditionFailed, err)
		}
		obj = obj.If(storage.Conditions{GenerationMatch: gen})
	}
	// Uploads retry outside the library's attempt limit (it retries them
	// until the context ends): bound them here, per stretch without
	// progress.
	ur := &uploadRetry{max: b.opt.MaxAttempts, deadline: b.opt.RetryDeadline, stop: opt.Stop}
	obj = obj.Retryer(storage.WithErrorFunc(ur.shouldRetry))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ProgressFunc = ur.progress
	w.ContentType = "application/octet-stream"
	chunk := chunkSize(size, opt.PartSize)
	w.ChunkSize = int(chunk)
	w.ChunkRetryDeadline = b.opt.RetryDeadline
	w.ChunkTransferTimeout = b.opt.RequestTimeout + time.Duration(chunk/minThroughput)*time.Second

	// opt.Stop cancels the session while the chunks before the last are
	// sent, never the request that finalizes it (w.Close).
	watched := watchStop(wctx, opt.Stop, cancel)
	crc := crc32.New(castagnoli)
	copied, err := io.CopyBuffer(io.MultiWriter(w, crc), io.NewSectionReader(r, 0, size), make([]byte, copyBufSize))
	if err == nil && copied != size {
		err = fmt.Errorf("source ended after %d of %d bytes: %w", copied, size, io.ErrUnexpectedEOF)
	}
	if stopped := watched(); stopped {
		err = fmt.Errorf("gcs: put %s: %w", key, backend.ErrStopped)
	}
	if err == nil {
		err = ctx.Err() // cancelled after the last write: do not finalize
	}
	if err != nil {
		// Abort before anything can finalize: cancel the session and
		// close the library's pipe with an error rather than EOF (Close
		// alone would race the cancellation and could finalize a short
		// object).
		cancel()
		_ = w.CloseWithError(err) //nolint:staticcheck // deterministic abort, see above
		_ = w.Close()
		return backend.ObjectInfo{}, b.putErr(ctx, key, silenced(ur, err))
	}
	if err := w.Close(); err != nil {
		if ur.silent() { // nothing answers: asking the object would only wait too
			return backend.ObjectInfo{}, b.putErr(ctx, key, silenced(ur, err))
		}
		// The final request failed without a verdict (no answer, the
		// session gone) or with a 412 that the upload itself may have
		// caused: ask the object. So too for a 5xx left standing by the
		// stop (no retry to tell): a gateway gives one for an answer it
		// lost after the server stored the object.
		code := httpCode(err)
		if size-ur.committed() <= chunk && (ambiguous(ctx, err) || code == http.StatusPreconditionFailed ||
			(code/100 == 5 && backend.Stopped(opt.Stop) && ctx.Err() == nil)) {
			s := sent{size: size, crc: crc.Sum32(), prior: priorGeneration(opt.IfVersion), window: b.confirmWindow(size)}
			if oi, ok := b.confirmUpload(ctx, key, s, err); ok {
				return oi, nil
			}
		}
		return backend.ObjectInfo{}, b.putErr(ctx, key, err)
	}
	return info(w.Attrs()), nil
}

// watchStop cancels the upload (cancel) when stop closes, until the
// returned function is called; that one reports whether stop closed
// before it, so that the caller does not finalize.
func watchStop(ctx context.Context, stop <-chan struct{}, cancel context.CancelFunc) func() bool {
	if stop == nil {
		return func() bool { return false }
	}
	end, ended := make(chan struct{}), make(chan bool, 1)
	go func() {
		select {
		case <-stop:
			cancel()
			ended <- true
		case <-end:
			ended <- false
		case <-ctx.Done():
			ended <- backend.Stopped(stop)
		}
	}()
	return func() bool {
		close(end)
		return <-ended || backend.Stopped(stop)
	}
}

// uploadRetry bounds the retries of one upload: at most max attempts and
// deadline of time since the last chunk that went through.
type uploadRetry struct {
	max      int
	deadline time.Duration
	stop     <-chan struct{} // PutOptions.Stop: no retry once closed

	mu         sync.Mutex
	failures   int
	unanswered int       // consecutive unanswered attempts since the last progress
	since      time.Time // first failure since the last progress
	done       int64     // bytes the server has acknowledged
}

func (u *uploadRetry) shouldRetry(err error) bool {
	if !shouldRetry(err) || backend.Stopped(u.stop) {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failures++
	if u.failures == 1 {
		u.since = time.Now()
	}
	if unanswered(err) {
		u.unanswered++
	} else {
		u.unanswered = 0
	}
	return u.failures < u.max && time.Since(u.since) < u.deadline && u.unanswered < silentAfter
}

// silent reports an upload given up because its endpoint stopped
// answering: its last silentAfter attempts went unanswered.
func (u *uploadRetry) silent() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.unanswered >= silentAfter
}

// progress records n bytes acknowledged by the server.
func (u *uploadRetry) progress(n int64) {
	u.mu.Lock()
	u.failures, u.unanswered = 0, 0
	u.done = n
	u.mu.Unlock()
}

// committed is how many bytes the server has acknowledged.
func (u *uploadRetry) committed() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.done
}

// silenced marks err as the endpoint's silence (backend.ErrUnavailable)
// when the upload was given up for it.
func silenced(ur *uploadRetry, err error) error {
	if ur.silent() && !errors.Is(err, backend.ErrUnavailable) {
		return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	return err
}

// putErr: a 412 is the IfVersion condition; a 404 can only be the bucket.
func (b *Backend) putErr(ctx context.Context, key string, err error) error {
	if httpCode(err) == 404 || errors.Is(err, storage.ErrObjectNotExist) {
		err = fmt.Errorf("%w: %w", backend.ErrNoBucket, err)
	}
	return wrap(ctx, "put", key, err)
}

// Copy rewrites src (at srcVersion when set) to dst on the server; dst
// appears when the rewrite completes. A missing source is ErrNotExist; a
// pinned generation that was replaced is ErrVersionChanged.
func (b *Backend) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	s := b.bucket.Object(src)
	gen := int64(-1)
	if srcVersion != "" {
		g, err := parseGeneration(srcVersion)
		if err != nil {
			return backend.ObjectInfo{}, fmt.Errorf("gcs: copy %s: %w: %w", src, backend.ErrVersionChanged, err)
		}
		gen = g
		s = s.Generation(gen)
	}
	attrs, err := b.bucket.Object(dst).CopierFrom(s).Run(ctx)
	if err != nil {
		if errors.Is(err, storage.ErrObjectNotExist) || httpCode(err) == 404 {
			return backend.ObjectInfo{}, b.copyMissing(ctx, src, gen, err)
		}
		return backend.ObjectInfo{}, wrap(ctx, "copy", src+" -> "+dst, err)
	}
	return info(attrs), nil
}

// copyMissing resolves a 404 on copy like readErr does for reads.
func (b *Backend) copyMissing(ctx context.Context, src string, gen int64, err error) error {
	cur, serr := b.Stat(ctx, src)
	switch {
	case serr == nil && gen > 0 && cur.Version != strconv.FormatInt(gen, 10):
		return fmt.Errorf("gcs: copy %s: %w: generation %d is gone, current is %s", src, backend.ErrVersionChanged, gen, cur.Version)
	case serr != nil && !errors.Is(serr, backend.ErrNotExist):
		return wrap(ctx, "copy", src, err)
	}
	return fmt.Errorf("gcs: copy %s: %w: %w", src, backend.ErrNotExist, err)
}

// Delete removes the live generation of key; a missing key is not an
// error (nor, therefore, is a retried delete that already succeeded).
func (b *Backend) Delete(ctx context.Context, key string) error {
	octx, cancel := b.opContext(ctx)
	defer cancel()
	err := b.bucket.Object(key).Delete(octx)
	if err == nil || errors.Is(err, storage.ErrObjectNotExist) {
		return nil
	}
	return wrap(ctx, "delete", key, b.opErr(ctx, octx, err))
}
