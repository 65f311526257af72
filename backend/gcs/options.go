package gcs

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// emulatorEnv is the variable the Google client libraries read to talk to
// an emulator (fake-gcs-server, the Cloud Storage testbench) without
// credentials.
const emulatorEnv = "STORAGE_EMULATOR_HOST"

// Options configure a GCS backend. The zero value of a field is not a
// usable default: start from DefaultOptions.
type Options struct {
	// Endpoint overrides the JSON API endpoint, e.g.
	// "http://127.0.0.1:4443" or "https://storage.example.com/storage/v1/".
	// A URL without a path gets "/storage/v1/". "" uses STORAGE_EMULATOR_HOST
	// when set, else storage.googleapis.com. Credentials are never sent to
	// a plain-http endpoint (an emulator, which needs none).
	Endpoint string
	// KeyFile is a credentials JSON file (a service-account key, or any
	// other type the Google auth library understands). "" uses Application
	// Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud's user
	// credentials, then the metadata server (GCE, GKE workload identity).
	KeyFile string
	// Anonymous sends no credentials at all: public buckets.
	Anonymous bool

	// MaxAttempts bounds the attempts of one request (first try included)
	// on 408, 429, 5xx and network errors.
	MaxAttempts int
	// InitialBackoff and MaxBackoff shape the exponential backoff (factor
	// 2, with jitter) between attempts.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// RetryDeadline bounds the time spent retrying one request, and each
	// upload chunk.
	RetryDeadline time.Duration
	// RequestTimeout bounds each attempt's wait for response headers
	// (after the request body is sent) and each upload chunk's transfer.
	// Metadata operations (Stat, List, Delete, Check) are also bounded as a
	// whole by RetryDeadline+RequestTimeout.
	RequestTimeout time.Duration
	// StallTimeout: a ReadRange body that delivers no byte for this long
	// fails with backend.ErrUnavailable.
	StallTimeout time.Duration
	// MaxConnsPerHost caps the TCP connections to the endpoint; 0 means
	// no cap. Idle connections are kept up to the same number (64 when 0).
	MaxConnsPerHost int
}

// DefaultOptions returns the settings used when nothing is configured.
func DefaultOptions() Options {
	return Options{
		MaxAttempts:    6,
		InitialBackoff: 200 * time.Millisecond,
		MaxBackoff:     5 * time.Second,
		RetryDeadline:  60 * time.Second,
		RequestTimeout: 30 * time.Second,
		StallTimeout:   30 * time.Second,
	}
}

func (o Options) validate() error {
	var errs []error
	if o.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("MaxAttempts %d < 1", o.MaxAttempts))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"InitialBackoff", o.InitialBackoff},
		{"MaxBackoff", o.MaxBackoff},
		{"RetryDeadline", o.RetryDeadline},
		{"RequestTimeout", o.RequestTimeout},
		{"StallTimeout", o.StallTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	if o.MaxBackoff < o.InitialBackoff {
		errs = append(errs, fmt.Errorf("MaxBackoff %v < InitialBackoff %v", o.MaxBackoff, o.InitialBackoff))
	}
	if o.MaxConnsPerHost < 0 {
		errs = append(errs, fmt.Errorf("MaxConnsPerHost %d < 0", o.MaxConnsPerHost))
	}
	if o.KeyFile != "" && o.Anonymous {
		errs = append(errs, errors.New("KeyFile and Anonymous are exclusive"))
	}
	return errors.Join(errs...)
}

// endpoint is where requests go, resolved once in New.
type endpoint struct {
	api      string // JSON API URL passed to the client; "" for the library default
	display  string // scheme://host for String(), "" for the default endpoint
	insecure bool   // plain http: never send credentials
	emulator bool   // from STORAGE_EMULATOR_HOST (the library handles it)
}

// resolveEndpoint applies Options.Endpoint, then STORAGE_EMULATOR_HOST.
func resolveEndpoint(opt string) (endpoint, error) {
	if opt != "" {
		u, err := parseEndpoint(opt)
		if err != nil {
			return endpoint{}, fmt.Errorf("gcs: endpoint %q: %w", redact(opt), err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/storage/v1/"
		} else if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		return endpoint{
			api:      u.String(),
			display:  u.Scheme + "://" + u.Host,
			insecure: u.Scheme == "http",
		}, nil
	}
	if host := os.Getenv(emulatorEnv); host != "" {
		if !strings.Contains(host, "://") {
			host = "http://" + host
		}
		u, err := parseEndpoint(host)
		if err != nil {
			return endpoint{}, fmt.Errorf("gcs: %s %q: %w", emulatorEnv, redact(host), err)
		}
		return endpoint{display: u.Scheme + "://" + u.Host, insecure: true, emulator: true}, nil
	}
	return endpoint{}, nil
}

func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme must be http or https")
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host")
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u, nil
}

// redact drops user info and query from a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
