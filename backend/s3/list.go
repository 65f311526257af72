package s3

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratafs/strata/backend"
)

// maxListKeys is S3's page size cap.
const maxListKeys = 1000

// startAfterToken marks a token of ours: the rest is a StartAfter key. S3
// continuation tokens are base64 and never contain ':'.
const startAfterToken = "start-after:"

// List returns one page of ListObjectsV2: delimiter "/" unless Recursive;
// S3 returns objects and common prefixes in one byte-ordered stream, so
// the page rules of backend.ListPage hold as they come.
func (b *Backend) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	limit := opt.Limit
	if limit <= 0 || limit > maxListKeys {
		limit = maxListKeys
	}
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, MaxKeys: aws.Int32(int32(limit))}
	if prefix != "" {
		in.Prefix = &prefix
	}
	// Keys are sent URL-encoded: XML 1.0 cannot carry control characters
	// such as \x01, and a key holding one would otherwise make the whole
	// page undecodable.
	in.EncodingType = types.EncodingTypeUrl
	if !opt.Recursive {
		in.Delimiter = aws.String("/")
	}
	startAfter, resumed := strings.CutPrefix(opt.Token, startAfterToken)
	switch {
	case resumed:
		in.StartAfter = &startAfter
	case opt.Token != "":
		in.ContinuationToken = &opt.Token
	}
	timeout := b.metaTimeout() // a page of a big directory can be slow to come
	if limit == 1 {
		timeout = b.lookupTimeout() // a lookup's, or a probe's
	}
	out, err := b.client.ListObjectsV2(ctx, in, timeout)
	if err != nil {
		return backend.ListPage{}, mapErr("list", prefix, err)
	}
	// Decode only what the server says it encoded: a server that ignores
	// EncodingType sends raw keys, and decoding those would turn a key
	// "a%41" into "aA".
	decode := func(s *string) (string, error) { return aws.ToString(s), nil }
	if out.EncodingType == types.EncodingTypeUrl {
		decode = decodeKey
	}
	page := backend.ListPage{
		Objects:  make([]backend.ObjectInfo, 0, len(out.Contents)),
		Prefixes: make([]string, 0, len(out.CommonPrefixes)),
	}
	last := "" // the greatest key or prefix of the page, filtered or not
	for _, o := range out.Contents {
		key, err := decode(o.Key)
		if err != nil {
			return backend.ListPage{}, fmt.Errorf("s3: list %s: %w", prefix, err)
		}
		last = max(last, key)
		if resumed && key <= startAfter {
			continue
		}
		page.Objects = append(page.Objects, backend.ObjectInfo{
			Key:     key,
			Size:    aws.ToInt64(o.Size),
			MTime:   aws.ToTime(o.LastModified),
			Version: trimETag(o.ETag),
		})
	}
	for _, cp := range out.CommonPrefixes {
		p, err := decode(cp.Prefix)
		if err != nil {
			return backend.ListPage{}, fmt.Errorf("s3: list %s: %w", prefix, err)
		}
		last = max(last, p)
		if resumed && p <= startAfter {
			continue // a prefix holding the start-after key comes back
		}
		page.Prefixes = append(page.Prefixes, p)
	}
	switch {
	case aws.ToBool(out.IsTruncated):
		page.Next = aws.ToString(out.NextContinuationToken)
		if page.Next == "" {
			return backend.ListPage{}, fmt.Errorf("s3: list %s: truncated page without a continuation token", prefix)
		}
	case len(out.Contents)+len(out.CommonPrefixes) >= limit && last != "":
		// A full page that claims to be the last: some servers get this
		// wrong (MinIO, when a folder object equal to the prefix fills the
		// page, drops the rest). Ask once more after the last entry; the
		// cost is one empty page when the claim was true.
		page.Next = startAfterToken + last
	}
	return page, nil
}

// decodeKey decodes a key or prefix of a listing sent with EncodingType
// url. S3 and MinIO encode as url.QueryEscape does, but for '/' (and, in
// MinIO, '*'), so a space comes as '+' and a '+' as "%2B": QueryUnescape is
// the inverse.
func decodeKey(s *string) (string, error) {
	k, err := url.QueryUnescape(aws.ToString(s))
	if err != nil {
		return "", fmt.Errorf("url-encoded key %q: %w", aws.ToString(s), err)
	}
	return k, nil
}
