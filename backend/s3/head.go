package s3

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/strata/backend"
)

// ReadHead is a GET of key's first n bytes that also stands for its HEAD:
// the size comes from Content-Range, the version from the ETag. An empty
// object has no byte 0 to range over (416): it is answered by a HEAD. The
// bytes are only read ahead of an open: a body that breaks, or sends
// nothing for headStall, leaves the answer without data (no retry,
// no error), and the open fetches them.
func (b *Backend) ReadHead(ctx context.Context, key string, n int64) (backend.ObjectInfo, []byte, error) {
	if key == "" {
		return backend.ObjectInfo{}, nil, fmt.Errorf("s3: read head: empty key: %w", backend.ErrNotExist)
	}
	if n <= 0 {
		info, err := b.head(ctx, "stat", key, "")
		return info, nil, err
	}
	// Each attempt's wait for the headers bounded as a GET's (and a
	// HEAD's: lookupTimeout); the body's stall guard cancels it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &b.bucket, Key: &key, Range: aws.String(fmt.Sprintf("bytes=0-%d", n-1)),
	}, b.getTimeout())
	if err != nil {
		if errorCode(err) == "InvalidRange" || httpStatus(err) == 416 {
			info, err := b.head(ctx, "stat", key, "")
			return info, nil, err
		}
		return backend.ObjectInfo{}, nil, mapErr("read head", key, err)
	}
	defer out.Body.Close()
	size := aws.ToInt64(out.ContentLength) // a 200: the whole object
	if cr := aws.ToString(out.ContentRange); cr != "" {
		if size, err = totalOf(cr); err != nil {
			return backend.ObjectInfo{}, nil, fmt.Errorf("s3: read head %s: %w", key, err)
		}
	}
	info := backend.ObjectInfo{
		Key:     key,
		Size:    size,
		MTime:   aws.ToTime(out.LastModified),
		Version: trimETag(out.ETag),
	}
	data := make([]byte, min(n, size))
	wait := min(headStall, b.opt.ReadStallTimeout)
	stall := time.AfterFunc(wait, cancel)
	defer stall.Stop()
	for got := 0; got < len(data); {
		k, err := out.Body.Read(data[got:])
		got += k
		if k > 0 {
			stall.Reset(wait)
		}
		if err != nil && got < len(data) {
			return info, nil, nil
		}
	}
	return info, data, nil
}

// headStall bounds how long a lookup waits for a head's body to move: the
// bytes are only read ahead of an open, and a lookup answered by a HEAD
// would not have waited at all.
const headStall = 2 * time.Second

// totalOf is the object size of a Content-Range "bytes first-last/total".
func totalOf(cr string) (int64, error) {
	_, total, ok := strings.Cut(cr, "/")
	if ok {
		if n, err := strconv.ParseInt(total, 10, 64); err == nil && n >= 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("malformed Content-Range %q", cr)
}
