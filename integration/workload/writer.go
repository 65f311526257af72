package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// WaitObject polls the bucket until key exists with size bytes and
// returns when it first saw it.
func WaitObject(ctx context.Context, c *s3.Client, bucket, key string, size int64, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil && aws.ToInt64(out.ContentLength) == size {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d bytes, want %d", aws.ToInt64(out.ContentLength), size)
			}
			return time.Time{}, fmt.Errorf("s3://%s/%s not in the bucket after %s: %w", bucket, key, timeout, errors.Join(ctx.Err(), err))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitObjects polls the bucket until the objects under prefix are exactly
// want (key to size; "dir/" markers of a wanted object's directories are
// allowed) and returns when it first saw them so.
func WaitObjects(ctx context.Context, c *s3.Client, bucket, prefix string, want map[string]int64, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var diff error
	for {
		got, err := listSizes(ctx, c, bucket, prefix)
		if err == nil {
			if diff = objectsDiffer(got, want); diff == nil {
				return time.Now(), nil
			}
		} else {
			diff = err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("s3://%s/%s never held exactly the %d objects wanted in %s: %w",
				bucket, prefix, len(want), timeout, errors.Join(ctx.Err(), diff))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func listSizes(ctx context.Context, c *s3.Client, bucket, prefix string) (map[string]int64, error) {
	got := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			got[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return got, nil
}

// objectsDiffer says how got differs from want (nil: it does not).
func objectsDiffer(got, want map[string]int64) error {
	dirs := map[string]bool{}
	for k, size := range want {
		if g, ok := got[k]; !ok || g != size {
			return fmt.Errorf("%s: %d bytes (present %v), want %d", k, g, ok, size)
		}
		for i := range k {
			if k[i] == '/' {
				dirs[k[:i+1]] = true
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !dirs[k] {
			return fmt.Errorf("unwanted object %s", k)
		}
	}
	return nil
}

// ObjectSHA256 reads an object and returns its sha256 (hex).
func ObjectSHA256(ctx context.Context, c *s3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		return "", fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MultipartUpload uploads the file at path to key the plain way: one
// multipart upload of partSize parts, conc of them in flight, and returns
// when CompleteMultipartUpload has answered.
func MultipartUpload(ctx context.Context, c *s3.Client, bucket, key, path string, partSize int64, conc int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("upload %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("upload %s: %w", path, err)
	}
	mu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
	}
	n := int((fi.Size() + partSize - 1) / partSize)
	parts := make([]types.CompletedPart, n)
	errs := make([]error, n)
	sem := make(chan struct{}, max(conc, 1))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			off := int64(i) * partSize
			size := min(partSize, fi.Size()-off)
			num := int32(i + 1)
			out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key),
				UploadId: mu.UploadId, PartNumber: aws.Int32(num), ContentLength: aws.Int64(size),
				Body: io.NewSectionReader(f, off, size)})
			if err != nil {
				errs[i] = fmt.Errorf("part %d: %w", num, err)
				return
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_, _ = c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket),
			Key: aws.String(key), UploadId: mu.UploadId})
		return fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: mu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		return fmt.Errorf("upload s3://%s/%s: complete: %w", bucket, key, err)
	}
	return nil
}
