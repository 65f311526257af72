package s3

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// A mistyped --endpoint-url often reaches something that answers HTTP but
// is not S3: the MinIO console's port, a web server, a proxy's error
// page. The SDK then reports "301 MovedPermanently" or "NotFound", or, for
// a page served with 200, decodes it as an empty listing and the mount
// shows an empty bucket. The check tells a web page apart by its content
// type: S3 answers, errors included, are XML (or empty).

// webPageStatus returns the HTTP status of a check answered with a web
// page: from the listing's raw response when it "succeeded", else from
// its error's.
func webPageStatus(md middleware.Metadata, err error) (int, bool) {
	var resp *smithyhttp.Response
	if err == nil {
		resp, _ = awsmiddleware.GetRawResponse(md).(*smithyhttp.Response)
	} else if re := (*smithyhttp.ResponseError)(nil); errors.As(err, &re) {
		resp = re.Response
	}
	if resp == nil || resp.Response == nil {
		return 0, false
	}
	return resp.StatusCode, isWebPage(resp.Header)
}

func isWebPage(h http.Header) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(h.Get("Content-Type"))), "text/html")
}

// notS3Error is the check's error for an endpoint that answered with a web
// page. It carries no backend sentinel: it is not an outage to wait out,
// nor a missing bucket.
func (b *Backend) notS3Error(status int, err error) error {
	msg := fmt.Sprintf("s3: check %s: %s does not answer as S3 (it sent a web page, HTTP %d): check --endpoint-url, which must be the S3 API's address and port, not a console's or a website's",
		b.bucket, b.endpointName(), status)
	if err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return errors.New(msg)
}

// endpointName is the endpoint the client sends to ("the default AWS
// endpoint" when none was given).
func (b *Backend) endpointName() string {
	if e := b.client.Options().BaseEndpoint; e != nil && *e != "" {
		return *e
	}
	return "the default AWS endpoint"
}
