package gcs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/stratafs/strata/backend"
)

// Interfaces this package implements.
var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Checker = (*Backend)(nil)
	_ backend.Closer  = (*Backend)(nil)
	_ backend.Writer  = (*Backend)(nil)
	_ backend.Deleter = (*Backend)(nil)
	_ backend.Copier  = (*Backend)(nil)
)

// Backend is one GCS bucket. It is safe for concurrent use and holds no
// mutable state of its own.
type Backend struct {
	client *storage.Client
	hc     *http.Client
	bucket *storage.BucketHandle
	name   string
	ep     endpoint
	opt    Options
	// jsonReads: reads go through the JSON API (an emulator or a custom
	// endpoint); storedBytes then asks for the stored bytes.
	jsonReads bool
}

// New opens bucket with opt. It resolves credentials and the endpoint but
// makes no request: call Check to verify both before mounting.
func New(ctx context.Context, bucket string, opt Options) (*Backend, error) {
	if bucket == "" {
		return nil, errors.New("gcs: empty bucket name")
	}
	if err := opt.validate(); err != nil {
		return nil, fmt.Errorf("gcs: options: %w", err)
	}
	ep, err := resolveEndpoint(opt.Endpoint)
	if err != nil {
		return nil, err
	}
	hc, err := newHTTPClient(ctx, opt, ep)
	if err != nil {
		return nil, err
	}
	// Reads use the library's default XML API path on GCS itself. An
	// emulator or a custom endpoint is read through the JSON API, as
	// every other request: fake-gcs-server serves the XML API only for
	// the host given as its -public-host, which its README's way of
	// starting it leaves unset (every read was a 404). Both paths ask for
	// stored bytes (ReadCompressed, or storedBytes for JSON) and send the object name as one
	// escaped path segment ("a/../b" goes out as "a%2F..%2Fb"), so no key
	// is open to path normalisation.
	copts := []option.ClientOption{option.WithHTTPClient(hc), storage.WithDisabledClientMetrics()}
	if ep.api != "" {
		copts = append(copts, option.WithEndpoint(ep.api))
	}
	jsonReads := ep.api != "" || ep.emulator
	if jsonReads {
		copts = append(copts, storage.WithJSONReads())
	}
	client, err := storage.NewClient(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("gcs: client: %w", err)
	}
	// RetryAlways: every operation this package issues is safe to repeat.
	// Reads, lists and stats are idempotent; a chunked put is a resumable
	// session whose URI makes chunk retries exact; a one-request put
	// repeated writes the same bytes (a conditional one whose first
	// attempt landed unseen reports ErrPreconditionFailed: the object is
	// there, the caller re-checks); a copy rewrites the same source
	// generation; a delete that already happened is a 404, which Delete
	// treats as success. Attempts and total time are bounded.
	client.SetRetry(
		storage.WithPolicy(storage.RetryAlways),
		storage.WithBackoff(gax.Backoff{Initial: opt.InitialBackoff, Max: opt.MaxBackoff, Multiplier: 2}),
		storage.WithMaxAttempts(opt.MaxAttempts),
		storage.WithMaxRetryDuration(opt.RetryDeadline),
		storage.WithErrorFunc(shouldRetry),
	)
	return &Backend{client: client, hc: hc, bucket: client.Bucket(bucket), name: bucket, ep: ep, opt: opt, jsonReads: jsonReads}, nil
}

// String is "gs://bucket", or "gs://bucket@scheme://host" for a custom
// endpoint or an emulator. It never contains credentials.
func (b *Backend) String() string {
	if b.ep.display != "" {
		return "gs://" + b.name + "@" + b.ep.display
	}
	return "gs://" + b.name
}

// Close releases the client and its idle connections.
func (b *Backend) Close() error {
	err := b.client.Close()
	b.hc.CloseIdleConnections()
	return err
}

// Check lists at most one object of the bucket: it needs only the
// storage.objects.list permission every mount needs anyway (a bucket
// metadata read would need storage.buckets.get, which readers often lack).
func (b *Backend) Check(ctx context.Context) error {
	octx, cancel := b.opContext(ctx)
	defer cancel()
	it := b.bucket.Objects(octx, &storage.Query{Prefix: "", Delimiter: "/"})
	it.PageInfo().MaxSize = 1
	_, err := it.Next()
	if err == nil || errors.Is(err, iterator.Done) {
		return nil
	}
	err = b.opErr(ctx, octx, listErr(err))
	switch classify(err) {
	case backend.ErrNoBucket:
		return backend.Explain(fmt.Sprintf("gcs: bucket %s does not exist: check the name (%v)", b, err), backend.ErrNoBucket, err)
	case backend.ErrAccessDenied:
		if authCode(err) != 0 {
			return backend.Explain(fmt.Sprintf("gcs: access denied to %s: the credentials were refused when exchanged for a token: %v", b, err), backend.ErrAccessDenied, err)
		}
		return backend.Explain(fmt.Sprintf("gcs: access denied to %s: these credentials may not list the bucket "+
			"(it needs storage.objects.list, e.g. roles/storage.objectViewer): %v", b, err), backend.ErrAccessDenied, err)
	}
	return wrap(ctx, "check", b.String(), err)
}

// Stat returns the current generation of key.
func (b *Backend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	if key == "" {
		return backend.ObjectInfo{}, fmt.Errorf("gcs: stat %q: %w", key, backend.ErrNotExist)
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	attrs, err := b.bucket.Object(key).Attrs(octx)
	if err != nil {
		return backend.ObjectInfo{}, wrap(ctx, "stat", key, b.opErr(ctx, octx, err))
	}
	return info(attrs), nil
}

func info(a *storage.ObjectAttrs) backend.ObjectInfo {
	return backend.ObjectInfo{
		Key:     a.Name,
		Size:    a.Size,
		MTime:   a.Updated,
		Version: strconv.FormatInt(a.Generation, 10),
	}
}

// opContext bounds a metadata operation as a whole: every attempt and
// the backoff between them.
func (b *Backend) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.opt.RetryDeadline+b.opt.RequestTimeout)
}

// opErr tells the operation's own timeout (octx expired while the caller's
// ctx is live: the backend is unavailable) from the caller giving up.
func (b *Backend) opErr(ctx, octx context.Context, err error) error {
	if ctx.Err() == nil && octx.Err() != nil {
		return fmt.Errorf("%w after %v: %w", errOpTimeout, b.opt.RetryDeadline+b.opt.RequestTimeout, err)
	}
	return err
}
