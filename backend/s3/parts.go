package s3

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratafs/strata/backend"
)

var _ backend.PartWriter = (*Backend)(nil)

// partUpload is a multipart upload whose parts the caller sends as the
// file is written (backend.PartUpload).
type partUpload struct {
	b   *Backend
	key string
	id  string
}

// BeginParts creates a multipart upload of key.
func (b *Backend) BeginParts(ctx context.Context, key string) (backend.PartUpload, error) {
	if key == "" {
		return nil, fmt.Errorf("s3: put: empty key")
	}
	up, err := b.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &key}, b.metaTimeout())
	if err != nil {
		return nil, mapErr("put", key, err)
	}
	return &partUpload{b: b, key: key, id: aws.ToString(up.UploadId)}, nil
}

func (u *partUpload) SendPart(ctx context.Context, number int, r io.ReaderAt, off, n int64) (string, error) {
	if number < 1 || number > maxParts || n <= 0 {
		return "", fmt.Errorf("s3: put %s: part %d of %d bytes: out of range", u.key, number, n)
	}
	out, err := u.b.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &u.b.bucket, Key: &u.key, UploadId: &u.id,
		PartNumber:    aws.Int32(int32(number)),
		Body:          io.NewSectionReader(r, off, n),
		ContentLength: aws.Int64(n),
	}, u.b.xferTimeout(), u.b.sendStall())
	if err != nil {
		return "", mapErr(fmt.Sprintf("put (part %d)", number), u.key, err)
	}
	return aws.ToString(out.ETag), nil
}

func (u *partUpload) Complete(ctx context.Context, tags []string, size int64, opt backend.CompleteOptions) (_ backend.ObjectInfo, err error) {
	ifVersion := opt.IfVersion
	done := false
	defer func() {
		if !done {
			u.b.abortAfter(ctx, u.key, u.id, err)
		}
	}()
	if len(tags) == 0 {
		return backend.ObjectInfo{}, fmt.Errorf("s3: put %s: no parts", u.key)
	}
	parts := make([]types.CompletedPart, len(tags))
	for i, t := range tags {
		if t == "" {
			return backend.ObjectInfo{}, fmt.Errorf("s3: put %s: part %d not sent", u.key, i+1)
		}
		parts[i] = types.CompletedPart{ETag: aws.String(t), PartNumber: aws.Int32(int32(i + 1))}
	}
	if err := u.b.precheck(ctx, u.key, ifVersion); err != nil {
		return backend.ObjectInfo{}, err
	}
	etag, err := u.b.complete(ctx, u.key, u.id, parts, size, ifVersion, opt.Stop)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	done = true
	return u.b.written(ctx, u.key, size, etag), nil
}

func (u *partUpload) Abort(ctx context.Context) { u.b.abort(ctx, u.key, u.id) }

func (u *partUpload) ID() string { return u.id }

// AbortParts aborts the multipart upload id of key (one a crash left
// open); NoSuchUpload (already completed or aborted) is not an error.
func (b *Backend) AbortParts(ctx context.Context, key, id string) error {
	_, err := b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: &id},
		b.metaTimeout())
	var missing *types.NoSuchUpload
	if err == nil || errors.As(err, &missing) {
		return nil
	}
	if err = mapErr("abort upload", key, err); errors.Is(err, backend.ErrNotExist) {
		return nil
	}
	return err
}
