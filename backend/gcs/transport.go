package gcs

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	htransport "google.golang.org/api/transport/http"

	"github.com/stratafs/strata/backend"
)

// defaultIdleConns is how many idle connections are kept to the endpoint
// when MaxConnsPerHost is 0: enough for parallel ranged reads without
// re-dialing (Go's default of 2 would churn connections).
const defaultIdleConns = 64

// baseTransport is the HTTP/1.1 transport under the auth layer. HTTP/1.1
// on many connections rather than HTTP/2 multiplexed on one: parallel
// ranged reads of large objects then spread over several TCP streams, as
// gcsfuse found faster. Dial, TLS and response-header timeouts bound each
// attempt; the library retries them.
func baseTransport(o Options) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = o.RequestTimeout
	t.ExpectContinueTimeout = time.Second
	t.IdleConnTimeout = 90 * time.Second
	t.ForceAttemptHTTP2 = false
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP1(true)
	t.MaxConnsPerHost = o.MaxConnsPerHost
	idle := o.MaxConnsPerHost
	if idle == 0 {
		idle = defaultIdleConns
	}
	t.MaxIdleConns = idle
	t.MaxIdleConnsPerHost = idle
	// Ranged reads must get the stored bytes: never let net/http ask for
	// gzip and transparently decompress (the library sets Accept-Encoding
	// itself for ReadCompressed).
	t.DisableCompression = true
	return t
}

// storedBytes asks for an object's stored bytes on JSON API downloads
// (alt=media): Accept-Encoding gzip, so a gzip-encoded object is not
// decompressed by the server and offsets match Stat. The library sets
// this header itself only on XML API reads (ReadCompressed) and refuses
// it on JSON reads, which an emulator or a custom endpoint uses.
type storedBytes struct{ rt http.RoundTripper }

func (s storedBytes) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media" && r.Header.Get("Accept-Encoding") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Accept-Encoding", "gzip")
	}
	return s.rt.RoundTrip(r)
}

// newHTTPClient builds the authenticated client: credentials from
// KeyFile, none (Anonymous, or a plain-http endpoint), or Application
// Default Credentials.
func newHTTPClient(ctx context.Context, o Options, ep endpoint) (*http.Client, error) {
	base := uploadStall{rt: storedBytes{baseTransport(o)}, d: o.StallTimeout}
	if o.Anonymous || ep.insecure {
		return &http.Client{Transport: base}, nil
	}
	opts := []option.ClientOption{
		option.WithScopes(storage.ScopeReadWrite),
		internaloption.EnableNewAuthLibrary(),
	}
	if o.KeyFile != "" {
		typ, err := credentialsType(o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("gcs: key file %s: %w", o.KeyFile, err)
		}
		opts = append(opts, option.WithAuthCredentialsFile(typ, o.KeyFile))
	}
	rt, err := htransport.NewTransport(ctx, base, opts...)
	if err != nil {
		if o.KeyFile != "" {
			return nil, fmt.Errorf("gcs: key file %s: %w: %w", o.KeyFile, backend.ErrAccessDenied, err)
		}
		return nil, backend.Explain(fmt.Sprintf("gcs: no usable credentials (set GOOGLE_APPLICATION_CREDENTIALS, "+
			"pass --key-file, or --anonymous for a public bucket): %v", err), backend.ErrAccessDenied, err)
	}
	return &http.Client{Transport: rt}, nil
}

// credentialsType reads the "type" field of a credentials JSON file so the
// auth library can be told what it is loading (it refuses to guess).
func credentialsType(path string) (option.CredentialsType, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("not a credentials JSON file: %w", err)
	}
	switch t := option.CredentialsType(f.Type); t {
	case option.ServiceAccount, option.AuthorizedUser, option.ImpersonatedServiceAccount,
		option.ExternalAccount:
		return t, nil
	default:
		return "", fmt.Errorf("unknown credentials type %q", f.Type)
	}
}
