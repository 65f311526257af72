package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Config reaches an S3-compatible server.
type S3Config struct {
	Endpoint             string // http://host:port
	Region               string
	AccessKey, SecretKey string
	// MaxConns bounds the connections kept per host (default 64).
	MaxConns int
}

// NewS3Client returns a path-style client for the server with a pooled
// transport and no optional checksums (plain GETs and PUTs, as a tuned
// client would send them).
func NewS3Client(c S3Config) *s3.Client {
	conns := c.MaxConns
	if conns <= 0 {
		conns = 64
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		WriteBufferSize:     256 << 10,
		ReadBufferSize:      256 << 10,
	}
	return s3.New(s3.Options{
		Region:                     c.Region,
		BaseEndpoint:               aws.String(c.Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, ""),
		HTTPClient:                 &http.Client{Transport: tr},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           5,
	})
}

// EnsureBucket creates bucket unless it exists.
func EnsureBucket(ctx context.Context, c *s3.Client, bucket string) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("workload: create bucket %s: %w", bucket, err)
	}
	return nil
}

// EmptyBucket deletes every object in bucket, and aborts its unfinished
// multipart uploads (a writer stopped mid-upload leaves parts that hold
// disk space too).
func EmptyBucket(ctx context.Context, c *s3.Client, bucket string) error {
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("workload: empty bucket %s: %w", bucket, err)
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				return fmt.Errorf("workload: empty bucket %s: delete %s: %w", bucket, aws.ToString(o.Key), err)
			}
		}
	}
	ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		return fmt.Errorf("workload: empty bucket %s: %w", bucket, err)
	}
	for _, u := range ups.Uploads {
		_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
		if err != nil {
			return fmt.Errorf("workload: empty bucket %s: abort %s: %w", bucket, aws.ToString(u.Key), err)
		}
	}
	return nil
}

// PutFunc uploads the local file at path (size bytes) as key.
type PutFunc func(ctx context.Context, key, path string, size int64) error

// S3Put returns a PutFunc for bucket.
func S3Put(c *s3.Client, bucket string) PutFunc {
	return func(ctx context.Context, key, path string, size int64) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: f,
			ContentLength: aws.Int64(size),
		})
		return err
	}
}

// GCSPut returns a PutFunc for a bucket of a GCS JSON API endpoint
// (fake-gcs-server): one simple media upload per object.
func GCSPut(endpoint, bucket string) PutFunc {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return func(ctx context.Context, key, path string, size int64) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		u := fmt.Sprintf("%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s",
			endpoint, url.PathEscape(bucket), url.QueryEscape(key))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, f)
		if err != nil {
			return err
		}
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
}

// Progress is how far an upload has come.
type Progress struct {
	Bytes, TotalBytes     int64
	Objects, TotalObjects int64
}

// String prints "1.2GiB of 2GiB, 3000 of 100000 objects".
func (p Progress) String() string {
	return fmt.Sprintf("%s of %s, %d of %d objects", FormatSize(p.Bytes), FormatSize(p.TotalBytes), p.Objects, p.TotalObjects)
}

// Upload puts every entry (dir/<path> as key <path>) with parallel
// uploads; progress, if not nil, is called every few seconds and at the
// end.
func Upload(ctx context.Context, put PutFunc, dir string, entries []FileEntry, parallel int, progress func(Progress)) error {
	if parallel <= 0 {
		parallel = 32
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := TotalSize(entries)
	var done, objects atomic.Int64
	report := func() Progress {
		return Progress{Bytes: done.Load(), TotalBytes: total, Objects: objects.Load(), TotalObjects: int64(len(entries))}
	}
	stopTick := make(chan struct{})
	if progress != nil {
		go func() {
			t := time.NewTicker(5 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-stopTick:
					return
				case <-t.C:
					progress(report())
				}
			}
		}()
	}
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	next := make(chan FileEntry)
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range next {
				err := putRetry(ctx, put, e.Path, filepath.Join(dir, filepath.FromSlash(e.Path)), e.Size)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("workload: upload %s: %w", e.Path, err); cancel() })
					continue
				}
				done.Add(e.Size)
				objects.Add(1)
			}
		}()
	}
feed:
	for _, e := range entries {
		select {
		case next <- e:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(stopTick)
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("workload: upload: %w", err)
	}
	if progress != nil {
		progress(report())
	}
	return nil
}

// uploadAttempts bounds retries of one object: uploads are idempotent, and
// a loaded machine can stall a request until the server gives up on it
// (MinIO answers IncompleteBody, which the SDK does not retry).
const uploadAttempts = 4

func putRetry(ctx context.Context, put PutFunc, key, path string, size int64) error {
	var err error
	for attempt := 0; attempt < uploadAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(1<<attempt) * 500 * time.Millisecond):
			}
		}
		if err = put(ctx, key, path, size); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("%d attempts: %w", uploadAttempts, err)
}
