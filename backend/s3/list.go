package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
	out, err := b.client.ListObjectsV2(ctx, in, b.metaTimeout())
	if err != nil {
		return backend.ListPage{}, mapErr("list", prefix, err)
	}
	page := backend.ListPage{
		Objects:  make([]backend.ObjectInfo, 0, len(out.Contents)),
		Prefixes: make([]string, 0, len(out.CommonPrefixes)),
	}
	for _, o := range out.Contents {
		if resumed && aws.ToString(o.Key) <= startAfter {
			continue
		}
		page.Objects = append(page.Objects, backend.ObjectInfo{
			Key:     aws.ToString(o.Key),
			Size:    aws.ToInt64(o.Size),
			MTime:   aws.ToTime(o.LastModified),
			Version: trimETag(o.ETag),
		})
	}
	for _, p := range out.CommonPrefixes {
		if resumed && aws.ToString(p.Prefix) <= startAfter {
			continue // a prefix holding the start-after key comes back
		}
		page.Prefixes = append(page.Prefixes, aws.ToString(p.Prefix))
	}
	switch {
	case aws.ToBool(out.IsTruncated):
		page.Next = aws.ToString(out.NextContinuationToken)
		if page.Next == "" {
			return backend.ListPage{}, fmt.Errorf("s3: list %s: truncated page without a continuation token", prefix)
		}
	case len(out.Contents)+len(out.CommonPrefixes) >= limit:
		// A full page that claims to be the last: some servers get this
		// wrong (MinIO, when a folder object equal to the prefix fills the
		// page, drops the rest). Ask once more after the last entry; the
		// cost is one empty page when the claim was true.
		last := ""
		if n := len(out.Contents); n > 0 {
			last = aws.ToString(out.Contents[n-1].Key)
		}
		if n := len(out.CommonPrefixes); n > 0 {
			last = max(last, aws.ToString(out.CommonPrefixes[n-1].Prefix))
		}
		if last != "" {
			page.Next = startAfterToken + last
		}
	}
	return page, nil
}

// Check verifies, with one ListObjectsV2 of one key, that the bucket
// exists and that the credentials may list it. The error says which
// credentials were used and what to do.
func (b *Backend) Check(ctx context.Context) error {
	source := "anonymous (NoSignRequest)"
	if b.creds != nil {
		c, err := b.creds.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("s3: check %s: no usable credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "+
				"AWS_PROFILE, a web identity or an instance role; or use anonymous access for a public bucket): %w: %w",
				b, backend.ErrAccessDenied, err)
		}
		source = "credentials from " + c.Source
	}
	_, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b.bucket, MaxKeys: aws.Int32(1)}, b.metaTimeout())
	if err == nil {
		return nil
	}
	sentinel := classify(err)
	var hint string
	switch {
	case errors.Is(sentinel, backend.ErrNoBucket):
		hint = "bucket does not exist (check the name, the endpoint and the region " + b.regionHint() + ")"
	case errors.Is(sentinel, backend.ErrAccessDenied):
		hint = fmt.Sprintf("access denied to %s, using %s: check the keys and that they allow s3:ListBucket", b, source)
	case errors.Is(sentinel, backend.ErrUnavailable):
		hint = "endpoint unreachable or failing"
	default:
		hint = "unexpected answer"
	}
	return wrapErr("check", b.bucket, sentinel, fmt.Errorf("%s: %w", hint, err))
}

func (b *Backend) regionHint() string {
	return fmt.Sprintf("%q", b.client.Options().Region)
}
