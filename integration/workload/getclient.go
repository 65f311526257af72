package workload

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// GetClient is the plain parallel ranged-GET client of the benchmark: no
// cache, no filesystem, just as many concurrent GETs as asked, with bytes
// discarded. It measures what the server (through the same proxy) can
// deliver.
type GetClient struct {
	S3     *s3.Client
	Bucket string
	// PartSize splits objects into ranged GETs (default 8 MiB);
	// PartsPerObject of them are in flight per object (default 4).
	PartSize       int64
	PartsPerObject int
}

// GetObjects fetches objects whole, concurrency of them at once, each in
// parallel ranged parts; one latency per object.
func (g *GetClient) GetObjects(ctx context.Context, entries []FileEntry, concurrency int) (Summary, error) {
	part := g.PartSize
	if part <= 0 {
		part = 8 << 20
	}
	perObj := max(g.PartsPerObject, 1)
	if g.PartsPerObject == 0 {
		perObj = 4
	}
	lat := make([]time.Duration, len(entries))
	start := time.Now()
	err := forEach(ctx, len(entries), concurrency, func(ctx context.Context, i int) error {
		e := entries[i]
		t0 := time.Now()
		parts := int((e.Size + part - 1) / part)
		err := forEach(ctx, max(parts, 1), perObj, func(ctx context.Context, p int) error {
			off := int64(p) * part
			n := min(part, e.Size-off)
			return g.getRange(ctx, e.Path, off, n)
		})
		lat[i] = time.Since(t0)
		return err
	})
	elapsed := time.Since(start)
	if err != nil {
		return Summary{}, err
	}
	return SummarizeLatencies(lat, TotalSize(entries), elapsed, concurrency), nil
}

// RandomRanges does count ranged GETs of size bytes at aligned random
// offsets of key (of objSize bytes) from each of workers goroutines.
func (g *GetClient) RandomRanges(ctx context.Context, key string, objSize int64, size, count, workers int, seed uint64, maxDur time.Duration) (Summary, error) {
	var mu sync.Mutex
	var all []time.Duration
	var bytes int64
	truncated := false
	start := time.Now()
	err := forEach(ctx, workers, workers, func(ctx context.Context, w int) error {
		rng := rand.New(rand.NewPCG(seed*1000+uint64(w)+1, 0x5eed))
		slots := objSize / int64(size)
		lat := make([]time.Duration, 0, count)
		defer func() {
			mu.Lock()
			all = append(all, lat...)
			bytes += int64(len(lat)) * int64(size)
			mu.Unlock()
		}()
		for i := 0; i < count; i++ {
			if maxDur > 0 && time.Since(start) > maxDur {
				mu.Lock()
				truncated = true
				mu.Unlock()
				return nil
			}
			t0 := time.Now()
			if err := g.getRange(ctx, key, rng.Int64N(slots)*int64(size), int64(size)); err != nil {
				return err
			}
			lat = append(lat, time.Since(t0))
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return Summary{}, err
	}
	s := SummarizeLatencies(all, bytes, elapsed, workers)
	s.Truncated = truncated
	return s, nil
}

// List pages through every key under prefix (ListObjectsV2, 1000 a page,
// no delimiter): the object-store equivalent of `ls -lR`, since each entry
// carries size and mtime. One op per key; one latency per page.
func (g *GetClient) List(ctx context.Context, prefix string) (Summary, error) {
	var lat []time.Duration
	var keys int64
	start := time.Now()
	p := s3.NewListObjectsV2Paginator(g.S3, &s3.ListObjectsV2Input{Bucket: aws.String(g.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		t0 := time.Now()
		page, err := p.NextPage(ctx)
		if err != nil {
			return Summary{}, fmt.Errorf("workload: list %s: %w", prefix, err)
		}
		lat = append(lat, time.Since(t0))
		keys += int64(len(page.Contents))
	}
	s := SummarizeLatencies(lat, 0, time.Since(start), 1)
	s.Ops = keys
	return s, nil
}

// ListTree lists prefix one directory at a time (a delimited listing of
// each, then of each of its subdirectories, in order): what a client that
// walks a bucket as a tree does, one round trip per directory and per
// 1,000 keys. Ops counts keys and directories.
func (g *GetClient) ListTree(ctx context.Context, prefix string) (Summary, error) {
	var lat []time.Duration
	var n int64
	start := time.Now()
	stack := []string{prefix}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t0 := time.Now()
		p := s3.NewListObjectsV2Paginator(g.S3, &s3.ListObjectsV2Input{Bucket: aws.String(g.Bucket), Prefix: aws.String(dir), Delimiter: aws.String("/")})
		var subs []string
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return Summary{}, fmt.Errorf("workload: list %s: %w", dir, err)
			}
			n += int64(len(page.Contents) + len(page.CommonPrefixes))
			for _, cp := range page.CommonPrefixes {
				subs = append(subs, aws.ToString(cp.Prefix))
			}
		}
		lat = append(lat, time.Since(t0))
		for i := len(subs) - 1; i >= 0; i-- { // visit in order
			stack = append(stack, subs[i])
		}
	}
	s := SummarizeLatencies(lat, 0, time.Since(start), 1)
	s.Ops = n
	return s, nil
}

func (g *GetClient) getRange(ctx context.Context, key string, off, n int64) error {
	if n <= 0 {
		return nil
	}
	out, err := g.S3.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(g.Bucket), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
	})
	if err != nil {
		return fmt.Errorf("workload: get %s [%d,+%d): %w", key, off, n, err)
	}
	defer out.Body.Close()
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	var got int64
	for {
		m, err := out.Body.Read(*buf)
		got += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("workload: get %s: %w", key, err)
		}
	}
	if got != n {
		return fmt.Errorf("workload: get %s [%d,+%d): got %d bytes", key, off, n, got)
	}
	return nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// forEach runs fn(i) for i in [0,n) with at most parallel at once and
// returns the first error (which cancels the rest).
func forEach(ctx context.Context, n, parallel int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	sem := make(chan struct{}, max(parallel, 1))
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		}(i)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
