package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/stratafs/strata/backend"
)

func TestClassify(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"object 404", fmt.Errorf("x: %w", storage.ErrObjectNotExist), backend.ErrNotExist},
		{"bucket 404", fmt.Errorf("x: %w", storage.ErrBucketNotExist), backend.ErrNoBucket},
		{"api 404", &googleapi.Error{Code: 404}, backend.ErrNotExist},
		{"401", &googleapi.Error{Code: 401}, backend.ErrAccessDenied},
		{"403", fmt.Errorf("wrapped: %w", &googleapi.Error{Code: 403}), backend.ErrAccessDenied},
		{"412", &googleapi.Error{Code: 412}, backend.ErrPreconditionFailed},
		{"408", &googleapi.Error{Code: 408}, backend.ErrUnavailable},
		{"429", &googleapi.Error{Code: 429}, backend.ErrUnavailable},
		{"503 after retries", fmt.Errorf("storage: retry failed after 6 attempts; last error: %w", &googleapi.Error{Code: 503}), backend.ErrUnavailable},
		{"400", &googleapi.Error{Code: 400}, backend.ErrInvalidRequest},
		{"400 invalid object name", &googleapi.Error{Code: 400, Message: "The specified object name is not valid."}, backend.ErrInvalidRequest},
		{"400 checksum mismatch", &googleapi.Error{Code: 400, Message: "Provided CRC32C \"AAAAAA==\" doesn't match calculated CRC32C \"Yo4Dnw==\"."}, nil},
		{"token refused", &url.Error{Op: "Get", Err: &auth.Error{Response: &http.Response{StatusCode: 400}}}, backend.ErrAccessDenied},
		{"token endpoint down", &auth.Error{Response: &http.Response{StatusCode: 503}}, backend.ErrUnavailable},
		{"connection refused", refused, backend.ErrUnavailable},
		{"cut body", io.ErrUnexpectedEOF, backend.ErrUnavailable},
		{"stalled", errStalled, backend.ErrUnavailable},
		{"op timeout", fmt.Errorf("%w: %w", errOpTimeout, context.DeadlineExceeded), backend.ErrUnavailable},
		{"already classified", fmt.Errorf("%w: %w", backend.ErrVersionChanged, storage.ErrObjectNotExist), backend.ErrVersionChanged},
		{"other", errors.New("storage: object name is empty"), nil},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("%s: classify(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
		err := wrap(context.Background(), "stat", "k", c.err)
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: wrap lost the sentinel: %v", c.name, err)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: wrap lost the cause: %v", c.name, err)
		}
	}
}

// The caller's own cancellation is reported as such, not as a backend
// failure.
func TestWrapCallerCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := wrap(ctx, "read", "k", fmt.Errorf("retry failed: %w", context.Canceled))
	if !errors.Is(err, context.Canceled) || errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("wrap after the caller cancelled: %v", err)
	}
	// The same error with a live caller context is our own timeout.
	err = wrap(context.Background(), "read", "k", context.DeadlineExceeded)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("a deadline the caller did not set: %v, want ErrUnavailable", err)
	}
}

func TestShouldRetry(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&googleapi.Error{Code: 503}, true},
		{&googleapi.Error{Code: 429}, true},
		{&googleapi.Error{Code: 404}, false},
		{&googleapi.Error{Code: 412}, false},
		{io.ErrUnexpectedEOF, true},
		{&url.Error{Op: "Get", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}, true},
		{&url.Error{Op: "Get", Err: timeoutErr{}}, true}, // response-header timeout
		{context.Canceled, false},
		// A deadline is retryable as far as the error goes (an upload
		// chunk's transfer timeout); an expired operation context is
		// caught by the library before it retries.
		{context.DeadlineExceeded, true},
		{errors.New("other"), false},
	}
	for _, c := range cases {
		if got := shouldRetry(c.err); got != c.want {
			t.Errorf("shouldRetry(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return false }

func TestUploadRetryBudget(t *testing.T) {
	u := &uploadRetry{max: 3, deadline: time.Hour}
	transient := &googleapi.Error{Code: 503}
	// shouldRetry spends the budget: three calls, in order.
	first, second, third := u.shouldRetry(transient), u.shouldRetry(transient), u.shouldRetry(transient)
	if !first || !second || third {
		t.Fatalf("retries %v %v %v: want two retries, then give up (3 attempts)", first, second, third)
	}
	u.progress(1)
	if !u.shouldRetry(transient) {
		t.Fatal("progress must restore the budget")
	}
	if u.shouldRetry(&googleapi.Error{Code: 403}) {
		t.Fatal("a 403 is not retried")
	}
	u = &uploadRetry{max: 100, deadline: time.Nanosecond}
	u.shouldRetry(transient)
	time.Sleep(time.Millisecond)
	if u.shouldRetry(transient) {
		t.Fatal("retrying past the deadline")
	}
}

func TestChunkSize(t *testing.T) {
	const k, m = 1 << 10, 1 << 20
	cases := []struct{ size, part, want int64 }{
		{0, 0, 256 * k},
		{1000, 0, 256 * k},
		{256 * k, 0, 512 * k}, // one more byte than the object: one request
		{16*m - 1, 0, 16 * m},
		{16 * m, 0, 16 * m},
		{1 << 30, 0, 32 * m},
		{100 << 30, 0, 64 * m},
		{1 << 30, 1, 256 * k},       // rounded up to the quantum
		{1 << 30, 300 * k, 512 * k}, // likewise
		{1 << 30, 8 * m, 8 * m},
	}
	for _, c := range cases {
		if got := chunkSize(c.size, c.part); got != c.want {
			t.Errorf("chunkSize(%d, %d) = %d, want %d", c.size, c.part, got, c.want)
		}
	}
}

func TestListToken(t *testing.T) {
	for _, tok := range []listToken{{name: "a"}, {name: "d/", prefix: true}, {name: "é/x y", prefix: false}} {
		got, err := decodeToken(encodeToken(tok))
		if err != nil || got != tok {
			t.Errorf("round trip of %+v: %+v, %v", tok, got, err)
		}
	}
	for _, bad := range []string{"!!", "eDp4", "bzo"} { // not base64, kind "x:", empty name
		if _, err := decodeToken(bad); !errors.Is(err, errBadToken) {
			t.Errorf("decodeToken(%q) = %v, want errBadToken", bad, err)
		}
	}
	if got := (listToken{name: "d/", prefix: true}).startOffset(); got != "d0" {
		t.Errorf("startOffset after prefix d/ = %q, want d0", got)
	}
	if got := (listToken{name: "d"}).startOffset(); got != "d" {
		t.Errorf("startOffset after object d = %q, want d", got)
	}
}

func TestResolveEndpoint(t *testing.T) {
	t.Setenv(emulatorEnv, "")
	for _, c := range []struct {
		in, api, display string
		insecure         bool
	}{
		{"", "", "", false},
		{"http://127.0.0.1:4443", "http://127.0.0.1:4443/storage/v1/", "http://127.0.0.1:4443", true},
		{"https://gcs.example.com/storage/v1", "https://gcs.example.com/storage/v1/", "https://gcs.example.com", false},
		{"https://u:p@gcs.example.com/?x=1", "https://gcs.example.com/storage/v1/", "https://gcs.example.com", false},
	} {
		ep, err := resolveEndpoint(c.in)
		if err != nil || ep.api != c.api || ep.display != c.display || ep.insecure != c.insecure {
			t.Errorf("resolveEndpoint(%q) = %+v, %v; want api %q display %q insecure %v", c.in, ep, err, c.api, c.display, c.insecure)
		}
	}
	t.Setenv(emulatorEnv, "localhost:9023")
	ep, err := resolveEndpoint("")
	if err != nil || !ep.emulator || !ep.insecure || ep.display != "http://localhost:9023" || ep.api != "" {
		t.Errorf("with %s set: %+v, %v", emulatorEnv, ep, err)
	}
}
