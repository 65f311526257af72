package s3

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/strata/backend"
)

// timeNow is time.Now, replaceable in tests.
var timeNow = time.Now

// copySource is "bucket/key" URL-encoded segment by segment, as
// x-amz-copy-source wants it.
func (b *Backend) copySource(key string) *string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return aws.String(url.PathEscape(b.bucket) + "/" + strings.Join(segs, "/"))
}

// Copy makes dst a server-side copy of src at srcVersion ("" for the
// current one). The source is first pinned with a HEAD, then copied with
// x-amz-copy-source-if-match, so dst never mixes versions: CopyObject up
// to CopyMultipartThreshold (5 GiB at most), UploadPartCopy above.
func (b *Backend) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	if dst == "" {
		return backend.ObjectInfo{}, fmt.Errorf("s3: copy %s: empty destination key", src)
	}
	for attempt := 0; ; attempt++ {
		info, err := b.copyOnce(ctx, src, srcVersion, dst)
		// Unpinned, a source replaced between the HEAD and the copy is
		// simply copied again at its new version.
		if srcVersion != "" || attempt == 2 || !errors.Is(err, backend.ErrVersionChanged) {
			return info, err
		}
	}
}

func (b *Backend) copyOnce(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	info, err := b.head(ctx, "copy", src, srcVersion)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	if info.Size > b.opt.CopyMultipartThreshold {
		return b.copyMultipart(ctx, src, dst, info)
	}
	out, err := b.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            &b.bucket,
		Key:               &dst,
		CopySource:        b.copySource(src),
		CopySourceIfMatch: quote(info.Version),
	}, b.xferTimeout())
	if err != nil {
		return backend.ObjectInfo{}, mapErrAs("copy", src+" to "+dst, err, backend.ErrPreconditionFailed, backend.ErrVersionChanged)
	}
	res := backend.ObjectInfo{Key: dst, Size: info.Size, MTime: timeNow()}
	if out.CopyObjectResult != nil {
		res.Version = trimETag(out.CopyObjectResult.ETag)
		if t := out.CopyObjectResult.LastModified; t != nil {
			res.MTime = *t
		}
	}
	if res.Version == "" {
		return backend.ObjectInfo{}, fmt.Errorf("s3: copy %s to %s: no ETag in the answer", src, dst)
	}
	return res, nil
}

func (b *Backend) copyMultipart(ctx context.Context, src, dst string, info backend.ObjectInfo) (backend.ObjectInfo, error) {
	up, err := b.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &dst}, b.metaTimeout())
	if err != nil {
		return backend.ObjectInfo{}, mapErr("copy", dst, err)
	}
	id := aws.ToString(up.UploadId)
	done := false
	defer func() {
		if !done {
			b.abort(ctx, dst, id)
		}
	}()
	partSize := partSizeFor(info.Size, b.opt.CopyPartSize)
	nParts := int((info.Size + partSize - 1) / partSize)
	parts, err := b.runParts(ctx, nParts, b.opt.UploadConcurrency, func(ctx context.Context, i int) (string, error) {
		first := int64(i) * partSize
		last := min(first+partSize, info.Size) - 1
		out, err := b.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket: &b.bucket, Key: &dst, UploadId: &id,
			PartNumber:        aws.Int32(int32(i + 1)),
			CopySource:        b.copySource(src),
			CopySourceIfMatch: quote(info.Version),
			CopySourceRange:   aws.String(fmt.Sprintf("bytes=%d-%d", first, last)),
		}, b.xferTimeout())
		if err != nil {
			return "", mapErrAs(fmt.Sprintf("copy (part %d of %d)", i+1, nParts), src+" to "+dst, err,
				backend.ErrPreconditionFailed, backend.ErrVersionChanged)
		}
		if out.CopyPartResult == nil {
			return "", fmt.Errorf("s3: copy %s to %s: part %d: no ETag in the answer", src, dst, i+1)
		}
		return aws.ToString(out.CopyPartResult.ETag), nil
	})
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	etag, err := b.complete(ctx, dst, id, parts, info.Size, "", nil)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	done = true
	return b.written(ctx, dst, info.Size, etag), nil
}

// Delete removes key; S3 answers a missing key with success too.
func (b *Backend) Delete(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}, b.metaTimeout())
	if err != nil {
		if s := classify(err); s == backend.ErrNotExist && errorCode(err) != "NoSuchBucket" {
			return nil
		}
		return mapErr("delete", key, err)
	}
	return nil
}
