package s3

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/strata/backend"
)

// StatHead is a ranged GET of the object's first max bytes instead of a
// HEAD: the same request price and round trip, and a small file looked up
// is read by the same request. An empty object (a range on it is 416) is
// asked with a HEAD after all.
func (b *Backend) StatHead(ctx context.Context, key string, max int64) (backend.ObjectInfo, []byte, error) {
	if max <= 0 {
		info, err := b.Stat(ctx, key)
		return info, nil, err
	}
	if key == "" {
		return backend.ObjectInfo{}, nil, fmt.Errorf("s3: stat %q: empty key: %w", key, backend.ErrNotExist)
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: &b.bucket, Key: &key, Range: aws.String(fmt.Sprintf("bytes=0-%d", max-1))}
	out, err := b.client.GetObject(gctx, in, b.getTimeout())
	if err != nil {
		if errorCode(err) == "InvalidRange" || httpStatus(err) == 416 {
			info, err := b.Stat(ctx, key)
			return info, nil, err
		}
		return backend.ObjectInfo{}, nil, mapErr("stat", key, err)
	}
	defer out.Body.Close()
	info := backend.ObjectInfo{Key: key, MTime: aws.ToTime(out.LastModified), Version: trimETag(out.ETag)}
	if cr := aws.ToString(out.ContentRange); cr != "" {
		first, _, total, err := parseContentRangeTotal(cr)
		if err != nil || first != 0 {
			return backend.ObjectInfo{}, nil, fmt.Errorf("s3: stat %s: unexpected Content-Range %q: %w", key, cr, backend.ErrUnavailable)
		}
		info.Size = total
	} else {
		info.Size = aws.ToInt64(out.ContentLength) // a 200: the whole object
	}
	want := min(info.Size, max)
	head := make([]byte, want)
	if _, err := io.ReadFull(out.Body, head); err != nil {
		return backend.ObjectInfo{}, nil, fmt.Errorf("s3: stat %s: reading its first %d bytes: %w: %w", key, want, backend.ErrUnavailable, err)
	}
	return info, head, nil
}

// parseContentRangeTotal parses "bytes first-last/total".
func parseContentRangeTotal(cr string) (first, last, total int64, err error) {
	first, last, err = parseContentRange(cr)
	if err != nil {
		return 0, 0, 0, err
	}
	_, t, _ := strings.Cut(cr, "/")
	if total, err = strconv.ParseInt(t, 10, 64); err != nil || total <= last {
		return 0, 0, 0, fmt.Errorf("malformed Content-Range %q", cr)
	}
	return first, last, total, nil
}
