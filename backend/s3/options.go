package s3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/strata/backend"
)

// Options configure an S3 backend. Zero fields take DefaultOptions' values.
type Options struct {
	// Endpoint is a custom endpoint URL (MinIO, Ceph, R2...): e.g.
	// "http://127.0.0.1:9000". "" uses AWS (or AWS_ENDPOINT_URL).
	Endpoint string
	// Region; "" takes it from the environment and shared config, and
	// falls back to us-east-1.
	Region string
	// Profile selects a shared config profile; "" means AWS_PROFILE or
	// "default".
	Profile string
	// ForcePathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint (most S3-compatible servers need it).
	ForcePathStyle bool
	// NoSignRequest sends anonymous requests (public buckets).
	NoSignRequest bool
	// AccessKeyID, SecretAccessKey and SessionToken are static
	// credentials; empty uses the standard chain (environment, shared
	// config and credentials files, SSO, web identity, ECS, IMDS).
	AccessKeyID, SecretAccessKey, SessionToken string

	// MaxAttempts per request, first try included (throttling, 5xx,
	// network errors and attempt timeouts are retried).
	MaxAttempts int
	// MaxBackoff bounds the exponential backoff (with full jitter)
	// between attempts.
	MaxBackoff time.Duration
	// RequestTimeout bounds one attempt of a metadata request (HEAD,
	// LIST, DELETE, multipart create/abort) and the wait for the response
	// headers of a GET.
	RequestTimeout time.Duration
	// ResponseTimeout, if set, replaces RequestTimeout as the bound on one
	// attempt's wait for the response headers of a GET, and on one attempt
	// of a HEAD or a one-key LIST (0: RequestTimeout). A mount sets it
	// short, so that a lost request is retried in seconds.
	ResponseTimeout time.Duration
	// TransferTimeout bounds one attempt of a request that carries or
	// copies data (PutObject, UploadPart, CopyObject, UploadPartCopy,
	// CompleteMultipartUpload).
	TransferTimeout time.Duration
	// SendStallTimeout cuts an attempt of a request carrying data
	// (PutObject, UploadPart, CompleteMultipartUpload) once nothing has
	// moved for this long: no byte of its body sent, no answer, no byte of
	// the answer. An operation whose attempts time out twice (this bound
	// or another) fails with ErrUnavailable instead of retrying (stall.go).
	SendStallTimeout time.Duration
	// ReadStallTimeout fails (or resumes) a GET body that delivers no byte
	// for this long while the caller is waiting for one.
	ReadStallTimeout time.Duration
	// ReadResumes is how many times a broken GET body is resumed, from the
	// byte where it broke, pinned to the same ETag.
	ReadResumes int
	// MaxConns is the connection pool size per host (idle connections
	// kept). Size it to the reads in flight: about 128 GETs plus uploads.
	MaxConns int

	// PartSize is the multipart part size; it grows with the object so
	// that any object fits in 10,000 parts.
	PartSize int64
	// MultipartThreshold: objects above it are uploaded in parts.
	MultipartThreshold int64
	// UploadConcurrency is the number of parts in flight per Put.
	UploadConcurrency int
	// CopyPartSize and CopyMultipartThreshold do the same for Copy
	// (CopyObject is limited to 5 GiB by S3).
	CopyPartSize, CopyMultipartThreshold int64
}

// DefaultOptions returns the options New uses for zero fields.
func DefaultOptions() Options {
	return Options{
		MaxAttempts:            10,
		MaxBackoff:             10 * time.Second,
		RequestTimeout:         30 * time.Second,
		TransferTimeout:        10 * time.Minute,
		SendStallTimeout:       30 * time.Second,
		ReadStallTimeout:       30 * time.Second,
		ReadResumes:            3,
		MaxConns:               256,
		PartSize:               16 << 20,
		MultipartThreshold:     64 << 20,
		UploadConcurrency:      8,
		CopyPartSize:           512 << 20,
		CopyMultipartThreshold: maxSinglePut,
	}
}

// S3 limits.
const (
	minPartSize  = 5 << 20
	maxPartSize  = 5 << 30
	maxParts     = 10000
	maxSinglePut = 5 << 30
)

func (o *Options) fill() {
	d := DefaultOptions()
	backend.OrDefault(&o.MaxAttempts, d.MaxAttempts)
	backend.OrDefault(&o.MaxBackoff, d.MaxBackoff)
	backend.OrDefault(&o.RequestTimeout, d.RequestTimeout)
	backend.OrDefault(&o.TransferTimeout, d.TransferTimeout)
	backend.OrDefault(&o.SendStallTimeout, d.SendStallTimeout)
	backend.OrDefault(&o.ReadStallTimeout, d.ReadStallTimeout)
	if o.ReadResumes < 0 {
		o.ReadResumes = 0
	} else if o.ReadResumes == 0 {
		o.ReadResumes = d.ReadResumes
	}
	backend.OrDefault(&o.MaxConns, d.MaxConns)
	backend.OrDefault(&o.PartSize, d.PartSize)
	backend.OrDefault(&o.MultipartThreshold, d.MultipartThreshold)
	backend.OrDefault(&o.UploadConcurrency, d.UploadConcurrency)
	backend.OrDefault(&o.CopyPartSize, d.CopyPartSize)
	backend.OrDefault(&o.CopyMultipartThreshold, d.CopyMultipartThreshold)
	o.CopyMultipartThreshold = min(o.CopyMultipartThreshold, maxSinglePut)
}

// Backend is one S3 bucket. It implements backend.Backend, Checker,
// Closer, Writer, Copier and Deleter. Keys are whole keys in the bucket;
// a mount prefix is the caller's business.
type Backend struct {
	bucket    string
	opt       Options
	client    *s3.Client
	creds     aws.CredentialsProvider // nil when anonymous
	transport *http.Transport
	name      string // String()
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Checker = (*Backend)(nil)
	_ backend.Closer  = (*Backend)(nil)
	_ backend.Writer  = (*Backend)(nil)
	_ backend.Copier  = (*Backend)(nil)
	_ backend.Deleter = (*Backend)(nil)
)

// New returns a backend for bucket. It loads the AWS configuration (which
// may read files and the environment) but sends no request: call Check to
// verify the bucket and the credentials.
func New(ctx context.Context, bucket string, opt Options) (*Backend, error) {
	if bucket == "" || strings.ContainsAny(bucket, "/ ") {
		return nil, fmt.Errorf("s3: invalid bucket name %q", bucket)
	}
	opt.fill()
	if opt.Endpoint != "" {
		u, err := url.Parse(opt.Endpoint)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("s3: endpoint %q is not a URL such as https://host:port", opt.Endpoint)
		}
	}
	// LoadDefaultConfig installs AWS_CA_BUNDLE into the HTTP client, which
	// it can only do on a BuildableClient (a plain *http.Client fails).
	bc := awshttp.NewBuildableClient().
		WithTransportOptions(func(t *http.Transport) { tuneTransport(t, opt) }).
		WithDialerOptions(func(d *net.Dialer) { d.Timeout, d.KeepAlive = 10*time.Second, 30*time.Second })
	loads := []func(*config.LoadOptions) error{
		config.WithHTTPClient(bc),
		config.WithRetryer(func() aws.Retryer { return newRetryer(opt) }),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if opt.Region != "" {
		loads = append(loads, config.WithRegion(opt.Region))
	}
	if opt.Profile != "" {
		loads = append(loads, config.WithSharedConfigProfile(opt.Profile))
	}
	if opt.AccessKeyID != "" || opt.SecretAccessKey != "" {
		loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			opt.AccessKeyID, opt.SecretAccessKey, opt.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, configErr(err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if opt.NoSignRequest {
		cfg.Credentials = aws.AnonymousCredentials{}
	}
	// The transport as LoadDefaultConfig left it (CA bundle included), in a
	// client of our own so that Close can release its connections.
	bcl, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		return nil, errors.New("s3: unexpected HTTP client type after loading the configuration")
	}
	tr := bcl.GetTransport()
	hc := &http.Client{Transport: progressTransport{tr}, CheckRedirect: limitedRedirect}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.HTTPClient = hc
		if opt.Endpoint != "" {
			o.BaseEndpoint = aws.String(opt.Endpoint)
		}
		o.UsePathStyle = opt.ForcePathStyle
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	b := &Backend{bucket: bucket, opt: opt, client: client, transport: tr, name: "s3://" + bucket}
	if !opt.NoSignRequest {
		b.creds = cfg.Credentials
	}
	// The endpoint as the client resolved it: Options.Endpoint, or
	// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / endpoint_url in the profile.
	if endpoint := aws.ToString(client.Options().BaseEndpoint); endpoint != "" {
		b.name += "@" + redactEndpoint(endpoint)
	}
	return b, nil
}

// tuneTransport sizes the pool for many concurrent ranged GETs. HTTP/2 is
// off: S3 does not speak it, and over one multiplexed connection many
// parallel reads of S3-compatible servers would share one TCP window.
func tuneTransport(t *http.Transport, opt Options) {
	t.MaxIdleConns = 2 * opt.MaxConns
	t.MaxIdleConnsPerHost = opt.MaxConns
	t.MaxConnsPerHost = 0
	t.IdleConnTimeout = 90 * time.Second
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ExpectContinueTimeout = time.Second
	t.ResponseHeaderTimeout = 0 // per attempt, by the attemptTimeout middleware
	t.DisableCompression = true // ranged bytes must arrive as stored
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
}

// newRetryer is the SDK standard retryer with more attempts, a bounded
// backoff with jitter, no client-side retry quota (a cache under a storm
// of 5xx should keep trying within MaxAttempts, not fail fast), and our
// attempt timeouts counted as retryable.
func newRetryer(opt Options) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = opt.MaxAttempts
		o.MaxBackoff = opt.MaxBackoff
		o.Backoff = retry.NewExponentialJitterBackoff(opt.MaxBackoff)
		o.RateLimiter = ratelimit.None
	})
}

// limitedRedirect follows only 307 and 308 (they keep the method and
// body), dropping the session token when the host changes, as the SDK's
// own client does; other redirects reach the SDK as errors naming the
// bucket's region.
func limitedRedirect(r *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return http.ErrUseLastResponse
	}
	switch r.Response.StatusCode {
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if last := via[len(via)-1]; last.URL.Host != r.URL.Host {
			r.Header.Del("X-Amz-Security-Token")
		}
		return nil
	}
	return http.ErrUseLastResponse
}

// redactEndpoint keeps scheme, host and path, never user information.
func redactEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "invalid-endpoint"
	}
	return strings.TrimSuffix(u.Host+u.Path, "/")
}

// String names the source: "s3://bucket", plus "@host[:port]" for a custom
// endpoint. No credentials.
func (b *Backend) String() string { return b.name }

// Bucket returns the bucket name.
func (b *Backend) Bucket() string { return b.bucket }

// Close releases idle connections. The backend must not be used after.
func (b *Backend) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// configErr names what the AWS configuration lacked. A profile named by
// --profile or AWS_PROFILE that no file defines is the usual one; the
// SDK's own text ("failed to get shared config profile, x") names neither
// the files it read nor how to point it at others.
func configErr(err error) error {
	var pe config.SharedConfigProfileNotExistError
	if errors.As(err, &pe) {
		files := "~/.aws/config or ~/.aws/credentials"
		if len(pe.Filename) > 0 {
			files = strings.Join(pe.Filename, " or ")
		}
		return backend.Explain(fmt.Sprintf("s3: profile %q: no such profile in %s (--profile and AWS_PROFILE name a profile; "+
			"AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE choose the files)", pe.Profile, files), nil, err)
	}
	return fmt.Errorf("s3: load AWS configuration: %w", err)
}
