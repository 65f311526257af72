package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratafs/strata/backend"
)

// Check verifies, with one ListObjectsV2 of one key, that the bucket
// exists and that the credentials may list it. Its error is written for
// the terminal (backend.Explained): what is wrong, with which bucket,
// endpoint and credentials, and what to check, each said once; the SDK's
// own error stays in the chain but only its gist is printed (request and
// host ids help nobody reading a failed mount).
func (b *Backend) Check(ctx context.Context) error {
	source := "anonymous access (--no-sign-request)"
	if b.creds != nil {
		c, err := b.creds.Retrieve(ctx)
		if err != nil {
			return backend.Explain(fmt.Sprintf("s3: no usable credentials for %s (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
				"AWS_PROFILE or --profile, a web identity or an instance role; or --no-sign-request for a public bucket): %s",
				b, gist(err)), backend.ErrAccessDenied, err)
		}
		source = "credentials from " + c.Source
	}
	out, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket: &b.bucket, MaxKeys: aws.Int32(1), EncodingType: types.EncodingTypeUrl, // the first key may be \x01
	}, b.metaTimeout())
	var md middleware.Metadata
	if out != nil {
		md = out.ResultMetadata
	}
	if status, page := webPageStatus(md, err); page {
		return b.notS3Error(status, err)
	}
	if err == nil {
		return nil
	}
	sentinel := classify(err)
	switch {
	case errors.Is(sentinel, backend.ErrNoBucket):
		return backend.Explain(fmt.Sprintf("s3: bucket %q does not exist at %s (region %q): check the name, --endpoint-url and --region (%s)",
			b.bucket, b.endpointName(), b.client.Options().Region, gist(err)), sentinel, err)
	case errors.Is(sentinel, backend.ErrAccessDenied):
		return backend.Explain(fmt.Sprintf("s3: access denied to %s with %s: check the keys and that they allow s3:ListBucket (%s)",
			b, source, gist(err)), sentinel, err)
	case errors.Is(sentinel, backend.ErrUnavailable):
		return backend.Explain(fmt.Sprintf("s3: cannot reach %s: %s", b.endpointName(), gist(err)), sentinel, err)
	}
	return backend.Explain(fmt.Sprintf("s3: check %s: unexpected answer: %s", b, gist(err)), sentinel, err)
}

// gist is the part of an SDK error a person can act on: the service's
// error code and message with the HTTP status, or the network error, or
// the error itself when it is neither.
func gist(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		s := ae.ErrorCode()
		if status := httpStatus(err); status != 0 {
			s = fmt.Sprintf("HTTP %d %s", status, s)
		}
		// NoSuchBucket's message repeats what the caller already said.
		if m := ae.ErrorMessage(); m != "" && ae.ErrorCode() != "NoSuchBucket" {
			s += ": " + m
		}
		return s
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Error()
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.Error()
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ", request send failed, "); i >= 0 {
		return msg[i+len(", request send failed, "):]
	}
	return msg
}
