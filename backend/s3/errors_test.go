package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stratafs/strata/backend"
)

// httpErr builds the error the SDK returns for a response with status and
// (optionally) an S3 error code.
func httpErr(status int, code string) error {
	inner := fmt.Errorf("status %d", status)
	if code != "" {
		inner = &smithy.GenericAPIError{Code: code, Message: "msg"}
	}
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}}
	err := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: resp, Err: inner}, RequestID: "REQ1"}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: err}
}

func TestClassify(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"NoSuchBucket", httpErr(404, "NoSuchBucket"), backend.ErrNoBucket},
		{"NoSuchKey", httpErr(404, "NoSuchKey"), backend.ErrNotExist},
		{"HEAD 404 without body", httpErr(404, ""), backend.ErrNotExist},
		{"NotFound code", httpErr(404, "NotFound"), backend.ErrNotExist},
		{"AccessDenied", httpErr(403, "AccessDenied"), backend.ErrAccessDenied},
		{"HEAD 403 without body", httpErr(403, ""), backend.ErrAccessDenied},
		{"InvalidAccessKeyId", httpErr(403, "InvalidAccessKeyId"), backend.ErrAccessDenied},
		{"SignatureDoesNotMatch", httpErr(403, "SignatureDoesNotMatch"), backend.ErrAccessDenied},
		{"ExpiredToken", httpErr(400, "ExpiredToken"), backend.ErrAccessDenied},
		{"PreconditionFailed", httpErr(412, "PreconditionFailed"), backend.ErrPreconditionFailed},
		{"412 without body", httpErr(412, ""), backend.ErrPreconditionFailed},
		{"ConditionalRequestConflict", httpErr(409, "ConditionalRequestConflict"), backend.ErrPreconditionFailed},
		{"SlowDown", httpErr(503, "SlowDown"), backend.ErrUnavailable},
		{"InternalError", httpErr(500, "InternalError"), backend.ErrUnavailable},
		{"502 without body", httpErr(502, ""), backend.ErrUnavailable},
		{"429", httpErr(429, ""), backend.ErrUnavailable},
		{"408 without body", httpErr(408, ""), backend.ErrUnavailable},
		{"retries exhausted on 503", &retry.MaxAttemptsError{Attempt: 10, Err: httpErr(503, "SlowDown")}, backend.ErrUnavailable},
		{"connection refused", &retry.MaxAttemptsError{Attempt: 10, Err: &smithyhttp.RequestSendError{Err: netErr}}, backend.ErrUnavailable},
		{"bare net error", netErr, backend.ErrUnavailable},
		{"truncated body", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), backend.ErrUnavailable},
		{"attempt timeouts exhausted", &retry.MaxAttemptsError{Attempt: 3, Err: &attemptTimeoutError{d: time.Second}}, backend.ErrUnavailable},
		{"caller cancelled", &smithy.CanceledError{Err: context.Canceled}, nil},
		{"caller deadline", fmt.Errorf("op: %w", context.DeadlineExceeded), nil},
		// A request the service refuses as such fails the same way again.
		{"MinIO invalid object name", httpErr(400, "XMinioInvalidObjectName"), backend.ErrInvalidRequest},
		{"S3 key too long", httpErr(400, "KeyTooLongError"), backend.ErrInvalidRequest},
		{"bad request", httpErr(400, "InvalidArgument"), backend.ErrInvalidRequest},
		{"HEAD 400 without body", httpErr(400, ""), backend.ErrInvalidRequest},
		{"entity too large", httpErr(400, "EntityTooLarge"), backend.ErrInvalidRequest},
		{"414", httpErr(414, ""), backend.ErrInvalidRequest},
		// 400s that a second attempt can pass: the body was damaged or
		// cut in transit, or a part went missing.
		{"IncompleteBody", httpErr(400, "IncompleteBody"), nil},
		{"BadDigest", httpErr(400, "BadDigest"), nil},
		{"XAmzContentSHA256Mismatch", httpErr(400, "XAmzContentSHA256Mismatch"), nil},
		{"InvalidPart", httpErr(400, "InvalidPart"), nil},
		{"RequestTimeout is a 400", httpErr(400, "RequestTimeout"), backend.ErrUnavailable},
		{"OperationAborted", httpErr(409, "OperationAborted"), nil},
		{"416", httpErr(416, "InvalidRange"), nil},
		{"plain error", errors.New("something"), nil},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("%s: classify = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWrapErr(t *testing.T) {
	cause := httpErr(404, "NoSuchKey")
	err := mapErr("get", "data/x", cause)
	if !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("%v does not match ErrNotExist", err)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.ServiceRequestID() != "REQ1" {
		t.Fatalf("the SDK error (with its request ID) is lost: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "s3: get data/x: ") {
		t.Errorf("message %q does not start with \"s3: get data/x: \"", err)
	}
	err = mapErrAs("get", "k", httpErr(412, "PreconditionFailed"), backend.ErrPreconditionFailed, backend.ErrVersionChanged)
	if !errors.Is(err, backend.ErrVersionChanged) || errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("412 on a pinned read: %v, want ErrVersionChanged only", err)
	}
	err = mapErr("get", "k", &smithy.CanceledError{Err: context.Canceled})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancellation lost: %v", err)
	}
}

func TestPutErr(t *testing.T) {
	missing := httpErr(404, "NoSuchKey")
	if err := putErr("put", "k", "v1", missing); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("If-Match on a missing key: %v, want ErrPreconditionFailed", err)
	}
	if err := putErr("put", "k", "", missing); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("unconditional put 404: %v", err)
	}
	if err := putErr("put", "k", "v1", httpErr(404, "NoSuchUpload")); errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("NoSuchUpload is not a failed condition: %v", err)
	}
	if err := putErr("put", "k", backend.VersionAbsent, httpErr(412, "PreconditionFailed")); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("If-None-Match refused: %v", err)
	}
}
