package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// WriteResult times one file written the way a training loop saves a
// checkpoint: open, sequential writes of one size, optionally fsync, close.
type WriteResult struct {
	Bytes int64
	// Writes are the write() call latencies, in order.
	Writes []time.Duration
	// Fsync and Close are the latencies of those calls (Fsync zero when
	// not asked for).
	Fsync, Close time.Duration
	// Elapsed runs from before open() to after close() returned: what
	// the application waits for.
	Elapsed time.Duration
}

// WriteFile writes size bytes of incompressible data to path in writes of
// bufSize bytes, then fsyncs it if asked and closes it.
func WriteFile(ctx context.Context, path string, size int64, bufSize int, fsync bool, seed uint64) (WriteResult, error) {
	buf := make([]byte, bufSize)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := 0; i+8 <= len(buf); i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			buf[i+k] = byte(v >> (8 * k))
		}
	}
	var r WriteResult
	start := time.Now()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return r, fmt.Errorf("write %s: %w", path, err)
	}
	for r.Bytes < size {
		if err := ctx.Err(); err != nil {
			f.Close()
			return r, err
		}
		chunk := buf[:min(int64(len(buf)), size-r.Bytes)]
		chunk[0]++ // no two writes alike: nothing below can deduplicate them
		t := time.Now()
		n, err := f.Write(chunk)
		r.Writes = append(r.Writes, time.Since(t))
		r.Bytes += int64(n)
		if err != nil {
			f.Close()
			return r, fmt.Errorf("write %s at %d: %w", path, r.Bytes, err)
		}
	}
	if fsync {
		t := time.Now()
		if err := f.Sync(); err != nil {
			f.Close()
			return r, fmt.Errorf("fsync %s: %w", path, err)
		}
		r.Fsync = time.Since(t)
	}
	t := time.Now()
	err = f.Close()
	r.Close = time.Since(t)
	r.Elapsed = time.Since(start)
	if err != nil {
		return r, fmt.Errorf("close %s: %w", path, err)
	}
	return r, nil
}

// Summary turns the result into a summary whose operations are the
// write() calls and whose Elapsed is the application's wait.
func (r WriteResult) Summary() Summary {
	return SummarizeLatencies(r.Writes, r.Bytes, r.Elapsed, 1)
}

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
