package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratafs/strata/backend"
)

// partSizeFor returns the part size for an object of size bytes: want (or
// the default), at least S3's 5 MiB minimum, and grown (in MiB steps) so
// that the object fits in 10,000 parts.
func partSizeFor(size, want int64) int64 {
	ps := max(want, minPartSize)
	if need := (size + maxParts - 1) / maxParts; ps < need {
		ps = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return min(ps, maxPartSize)
}

// Put uploads size bytes of r as key: one PutObject up to the multipart
// threshold (or up to PutOptions.PartSize when that is set), otherwise a
// multipart upload with parts in parallel. IfVersion becomes If-None-Match
// "*" or If-Match on PutObject and CompleteMultipartUpload, so the object
// appears only if the condition holds when it would become visible.
func (b *Backend) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	if key == "" || size < 0 {
		return backend.ObjectInfo{}, fmt.Errorf("s3: put %q: invalid key or size %d", key, size)
	}
	want := opt.PartSize
	if want <= 0 {
		want = b.opt.PartSize
	}
	partSize := partSizeFor(size, want)
	threshold := b.opt.MultipartThreshold
	if opt.PartSize > 0 {
		threshold = min(threshold, partSize)
	}
	if size <= threshold && size <= maxSinglePut {
		return b.putSingle(ctx, key, r, size, opt.IfVersion, opt.Stop)
	}
	conc := opt.Concurrency
	if conc <= 0 {
		conc = b.opt.UploadConcurrency
	}
	return b.putMultipart(ctx, key, r, size, partSize, conc, opt)
}

// conditions returns the If-Match / If-None-Match values for ifVersion.
func conditions(ifVersion string) (ifMatch, ifNoneMatch *string) {
	switch ifVersion {
	case "":
		return nil, nil
	case backend.VersionAbsent:
		return nil, aws.String("*")
	default:
		return quote(ifVersion), nil
	}
}

// putErr maps a conditional write's refusal: 412 (or 409 for a concurrent
// conditional write) and, for If-Match on a missing key, 404.
func putErr(op, key, ifVersion string, err error) error {
	s := classify(err)
	if ifVersion != "" && ifVersion != backend.VersionAbsent && s == backend.ErrNotExist && errorCode(err) != "NoSuchUpload" {
		s = backend.ErrPreconditionFailed
	}
	return wrapErr(op, key, s, err)
}

// putSingle sends one PutObject; once stop is closed no attempt of it is
// sent (the first one included), but one already sent is answered.
func (b *Backend) putSingle(ctx context.Context, key string, r io.ReaderAt, size int64, ifVersion string, stop <-chan struct{}) (backend.ObjectInfo, error) {
	ifMatch, ifNoneMatch := conditions(ifVersion)
	var sent atomic.Bool
	out, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		Body:          io.NewSectionReader(r, 0, size),
		ContentLength: aws.Int64(size),
		IfMatch:       ifMatch,
		IfNoneMatch:   ifNoneMatch,
	}, b.xferTimeout(), b.sendStall(), withStopGate(stop, &sent))
	if err == nil {
		return b.written(ctx, key, size, trimETag(out.ETag)), nil
	}
	// Landed or not? Asked when no later attempt can tell: the stop
	// refused the retry of an attempt that was sent (cut, timed out, a
	// gateway's 5xx), or a retry conditional on the key's old state
	// found the object the lost attempt made (412). A retry spent on an
	// endpoint that answers nothing is not asked either: it would only
	// wait too, and the writer's own retry, conditional, finds out.
	if ctx.Err() == nil && !silent(err) &&
		(classify(err) == backend.ErrPreconditionFailed || (errors.Is(err, backend.ErrStopped) && sent.Load())) {
		if info, ok := b.putLanded(ctx, key, r, size); ok {
			return info, nil
		}
	}
	return backend.ObjectInfo{}, putErr("put", key, ifVersion, err)
}

// putLanded reports whether key holds the size bytes of r, after a put
// whose answer says nothing of whether it landed: its attempt went
// unanswered (a cut connection, a gateway's 5xx) and the retry was
// refused by the stop (the file deleted or renamed meanwhile), or found
// the object that attempt made (412 on a conditional retry). A
// one-request put's ETag is its bytes' MD5 (not under SSE-KMS or SSE-C:
// there the object is not recognised, and the failure stands). The
// bytes are read again for it: a rare path.
func (b *Backend) putLanded(ctx context.Context, key string, r io.ReaderAt, size int64) (backend.ObjectInfo, bool) {
	h := md5.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
		return backend.ObjectInfo{}, false
	}
	info, err := b.head(ctx, "put", key, hex.EncodeToString(h.Sum(nil)))
	if err != nil || info.Size != size {
		return backend.ObjectInfo{}, false
	}
	return info, true
}

// written builds the ObjectInfo of a just-written object. The write
// response has no Last-Modified: a HEAD pinned to the new ETag supplies
// it; if the object has already been replaced, now is close enough.
func (b *Backend) written(ctx context.Context, key string, size int64, etag string) backend.ObjectInfo {
	info := backend.ObjectInfo{Key: key, Size: size, Version: etag, MTime: timeNow()}
	if h, err := b.head(ctx, "put", key, etag); err == nil {
		info.MTime = h.MTime
	}
	return info
}

// putMultipart sends the parts under opt.Stop and the completion without
// it (see PutOptions.Stop).
func (b *Backend) putMultipart(ctx context.Context, key string, r io.ReaderAt, size, partSize int64, conc int, opt backend.PutOptions) (_ backend.ObjectInfo, err error) {
	ifVersion := opt.IfVersion
	if err := b.precheck(ctx, key, ifVersion); err != nil {
		return backend.ObjectInfo{}, err
	}
	up, err := b.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &key}, b.metaTimeout())
	if err != nil {
		return backend.ObjectInfo{}, mapErr("put", key, err)
	}
	id := aws.ToString(up.UploadId)
	done := false
	defer func() {
		if !done {
			b.abortAfter(ctx, key, id, err)
		}
	}()
	nParts := int((size + partSize - 1) / partSize)
	pctx, stopParts := backend.WithStop(ctx, opt.Stop)
	defer stopParts()
	parts, err := b.runParts(pctx, nParts, conc, func(ctx context.Context, i int) (string, error) {
		off := int64(i) * partSize
		n := min(partSize, size-off)
		out, err := b.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &b.bucket, Key: &key, UploadId: &id,
			PartNumber:    aws.Int32(int32(i + 1)),
			Body:          io.NewSectionReader(r, off, n),
			ContentLength: aws.Int64(n),
		}, b.xferTimeout(), b.sendStall())
		if err != nil {
			return "", mapErr(fmt.Sprintf("put (part %d of %d)", i+1, nParts), key, err)
		}
		return aws.ToString(out.ETag), nil
	})
	if backend.Stopped(opt.Stop) { // whatever the parts answered
		err = fmt.Errorf("s3: put %s: %w", key, backend.ErrStopped)
	}
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	etag, err := b.complete(ctx, key, id, parts, size, ifVersion, opt.Stop)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	done = true
	return b.written(ctx, key, size, etag), nil
}

// precheck fails fast on a condition that already does not hold, before
// a multipart upload is sent or completed; the authoritative check is
// the one on CompleteMultipartUpload.
func (b *Backend) precheck(ctx context.Context, key, ifVersion string) error {
	if ifVersion == "" {
		return nil
	}
	cur, err := b.Stat(ctx, key)
	switch {
	case err != nil && !errors.Is(err, backend.ErrNotExist):
		return err
	case ifVersion == backend.VersionAbsent && err == nil:
		return fmt.Errorf("s3: put %s: key exists: %w", key, backend.ErrPreconditionFailed)
	case ifVersion != backend.VersionAbsent && (err != nil || cur.Version != ifVersion):
		return fmt.Errorf("s3: put %s: current version is not %s: %w", key, ifVersion, backend.ErrPreconditionFailed)
	}
	return nil
}

// runParts runs part(i) for i in [0, n) with at most conc in flight and
// returns the parts' ETags in order. The first failure cancels the rest.
func (b *Backend) runParts(ctx context.Context, n, conc int, part func(context.Context, int) (string, error)) ([]types.CompletedPart, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make([]types.CompletedPart, n)
	sem := make(chan struct{}, max(conc, 1))
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			etag, err := part(ctx, i)
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			parts[i] = types.CompletedPart{ETag: aws.String(etag), PartNumber: aws.Int32(int32(i + 1))}
		}(i)
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return parts, nil
}

// complete finishes a multipart upload under ifVersion. If the request
// succeeded but its answer was lost (the connection cut after the server
// completed), the SDK's retry finds no upload (NoSuchUpload), or, for a
// conditional upload, finds the condition broken by the object it just
// made (412, MinIO), or every retry is cut too: the object is then
// accepted if it is there with the ETag these parts produce (an MD5 of
// their MD5s, which another writer's object has only if it holds the
// same bytes in the same parts) and size bytes.
func (b *Backend) complete(ctx context.Context, key, id string, parts []types.CompletedPart, size int64, ifVersion string, stop <-chan struct{}) (string, error) {
	ifMatch, ifNoneMatch := conditions(ifVersion)
	out, err := b.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &b.bucket, Key: &key, UploadId: &id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		IfMatch:         ifMatch,
		IfNoneMatch:     ifNoneMatch,
	}, b.xferTimeout(), b.sendStall(), withStopGate(stop, nil))
	if err == nil {
		return trimETag(out.ETag), nil
	}
	if s := classify(err); ctx.Err() == nil &&
		(errorCode(err) == "NoSuchUpload" || s == backend.ErrUnavailable || s == backend.ErrPreconditionFailed ||
			errors.Is(err, backend.ErrStopped)) { // a retry refused after an attempt that may have landed
		if want := multipartETag(parts); want != "" {
			if info, herr := b.head(ctx, "put", key, want); herr == nil && info.Size == size {
				return info.Version, nil
			}
		}
	}
	return "", putErr("put", key, ifVersion, err)
}

// multipartETag is the ETag S3 gives an object made of parts with MD5
// ETags: md5(concatenated part MD5s) "-" part count; "" if a part ETag is
// not an MD5 (SSE-KMS, for one).
func multipartETag(parts []types.CompletedPart) string {
	h := md5.New()
	for _, p := range parts {
		raw, err := hex.DecodeString(strings.Trim(aws.ToString(p.ETag), `"`))
		if err != nil || len(raw) != md5.Size {
			return ""
		}
		h.Write(raw)
	}
	return fmt.Sprintf("%x-%d", h.Sum(nil), len(parts))
}

// abortAfter aborts a multipart upload that failed with err: at once, or,
// when the endpoint is unavailable (silent, out of reach), in the
// background, so that the failure is returned now rather than after the
// abort's own attempts have timed out too (a close of a file sent in
// parts took 2 minutes to fail). Parts an abort cannot remove stay, as
// before, until the bucket's lifecycle rule for incomplete uploads.
func (b *Backend) abortAfter(ctx context.Context, key, id string, err error) {
	if errors.Is(err, backend.ErrUnavailable) {
		go b.abort(ctx, key, id)
		return
	}
	b.abort(ctx, key, id)
}

// abort removes a failed multipart upload's parts. It runs even when ctx
// is cancelled (that is often why it runs), bounded by RequestTimeout.
func (b *Backend) abort(ctx context.Context, key, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*b.opt.RequestTimeout)
	defer cancel()
	_, _ = b.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: &id},
		b.metaTimeout())
}
