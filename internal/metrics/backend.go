package metrics

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/strata/backend"
)

// backendMetrics count and time requests to the origin.
type backendMetrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	bytes      *prometheus.CounterVec
	bodyErrors *prometheus.CounterVec
}

// backendBuckets: 1 ms to about 16 s, doubling.
var backendBuckets = prometheus.ExponentialBuckets(1e-3, 2, 15)

func newBackendMetrics() *backendMetrics {
	return &backendMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_backend_requests_total",
			Help: "Requests to the origin (after the backend's own retries), by operation and status.",
		}, []string{"op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_backend_request_duration_seconds",
			Help:    "Time until the origin answered (for reads: until the body starts), by operation and status.",
			Buckets: backendBuckets,
		}, []string{"op", "status"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_backend_bytes_total",
			Help: "Bytes moved to or from the origin: direction=received for read bodies, sent for uploads.",
		}, []string{"op", "direction"}),
		bodyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_backend_body_errors_total",
			Help: "Read bodies that failed part-way (connection reset, truncation, timeout).",
		}, []string{"op"}),
	}
}

// Status names an outcome by the backend's sentinel errors.
func Status(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, backend.ErrNotExist):
		return "not_found"
	case errors.Is(err, backend.ErrVersionChanged):
		return "version_changed"
	case errors.Is(err, backend.ErrNoBucket):
		return "no_bucket"
	case errors.Is(err, backend.ErrAccessDenied):
		return "access_denied"
	case errors.Is(err, backend.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, backend.ErrPreconditionFailed):
		return "precondition_failed"
	case errors.Is(err, backend.ErrNotSupported):
		return "not_supported"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "error"
}

func (b *backendMetrics) done(op string, start time.Time, err error) {
	st := Status(err)
	b.requests.WithLabelValues(op, st).Inc()
	b.latency.WithLabelValues(op, st).Observe(time.Since(start).Seconds())
}

// instrumented wraps a backend: the read side and Close. WrapBackend adds
// Checker, Writer, Deleter and Copier only where the wrapped backend has
// them (backend.Compose), so type assertions on the result answer as they
// would on the backend itself.
type instrumented struct {
	inner backend.Backend
	m     *backendMetrics
}

var _ backend.Base = (*instrumented)(nil)

// Method sets of the optional interfaces, added as the wrapped backend has them.
type (
	checkerPart struct{ b *instrumented }
	writerPart  struct{ b *instrumented }
	deleterPart struct{ b *instrumented }
	copierPart  struct{ b *instrumented }
)

// WrapBackend returns be with every request counted and timed. String()
// is be's, so the cache identity of the source does not change.
func (m *Metrics) WrapBackend(be backend.Backend) backend.Backend {
	b := &instrumented{inner: be, m: m.backend}
	return backend.Compose(b, be, backend.Optional{
		Checker: checkerPart{b}, Writer: writerPart{b}, Deleter: deleterPart{b}, Copier: copierPart{b},
	})
}

func (b *instrumented) String() string { return b.inner.String() }

func (b *instrumented) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	start := time.Now()
	oi, err := b.inner.Stat(ctx, key)
	b.m.done("stat", start, err)
	return oi, err
}

func (b *instrumented) ReadHead(ctx context.Context, key string, n int64) (backend.ObjectInfo, []byte, error) {
	start := time.Now()
	oi, data, err := backend.ReadHead(ctx, b.inner, key, n)
	if errors.Is(err, backend.ErrNotSupported) {
		return oi, data, err // no request was made
	}
	b.m.done("read_head", start, err)
	if len(data) > 0 {
		b.m.bytes.WithLabelValues("read_head", "received").Add(float64(len(data)))
	}
	return oi, data, err
}

func (b *instrumented) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	start := time.Now()
	p, err := b.inner.List(ctx, prefix, opt)
	b.m.done("list", start, err)
	return p, err
}

func (b *instrumented) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := b.inner.ReadRange(ctx, key, version, off, n)
	b.m.done("read", start, err)
	if err != nil {
		return nil, err
	}
	return &countingBody{rc: rc, bytes: b.m.bytes.WithLabelValues("read", "received"), errs: b.m.bodyErrors.WithLabelValues("read")}, nil
}

// countingBody counts a read body's bytes as they arrive, and its failure
// (anything but EOF) once.
type countingBody struct {
	rc     io.ReadCloser
	bytes  prometheus.Counter
	errs   prometheus.Counter
	failed bool
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	if n > 0 {
		c.bytes.Add(float64(n))
	}
	if err != nil && err != io.EOF && !c.failed {
		c.failed = true
		c.errs.Inc()
	}
	return n, err
}

func (c *countingBody) Close() error { return c.rc.Close() }

func (p checkerPart) Check(ctx context.Context) error {
	b := p.b
	c := b.inner.(backend.Checker)
	start := time.Now()
	err := c.Check(ctx)
	b.m.done("check", start, err)
	return err
}

func (b *instrumented) Close() error {
	if c, ok := b.inner.(backend.Closer); ok {
		return c.Close()
	}
	return nil
}

func (p writerPart) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	b := p.b
	w := b.inner.(backend.Writer)
	start := time.Now()
	oi, err := w.Put(ctx, key, r, size, opt)
	b.m.done("put", start, err)
	if err == nil {
		b.m.bytes.WithLabelValues("put", "sent").Add(float64(size))
	}
	return oi, err
}

func (p deleterPart) Delete(ctx context.Context, key string) error {
	b := p.b
	d := b.inner.(backend.Deleter)
	start := time.Now()
	err := d.Delete(ctx, key)
	b.m.done("delete", start, err)
	return err
}

func (p copierPart) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	b := p.b
	c := b.inner.(backend.Copier)
	start := time.Now()
	oi, err := c.Copy(ctx, src, srcVersion, dst)
	b.m.done("copy", start, err)
	return oi, err
}

// BeginParts passes an eager upload through, timed as a put: each part
// and the completion are counted when they end.
func (p writerPart) BeginParts(ctx context.Context, key string) (backend.PartUpload, error) {
	pw, ok := p.b.inner.(backend.PartWriter)
	if !ok {
		return nil, backend.ErrNotSupported
	}
	up, err := pw.BeginParts(ctx, key)
	if err != nil {
		p.b.m.done("put", time.Now(), err)
		return nil, err
	}
	return &partsCounted{PartUpload: up, b: p.b, start: time.Now()}, nil
}

// AbortParts passes through.
func (p writerPart) AbortParts(ctx context.Context, key, id string) error {
	pw, ok := p.b.inner.(backend.PartWriter)
	if !ok {
		return backend.ErrNotSupported
	}
	return pw.AbortParts(ctx, key, id)
}

// partsCounted counts an eager upload's bytes as sent and its completion
// as one put.
type partsCounted struct {
	backend.PartUpload
	b     *instrumented
	start time.Time
}

func (u *partsCounted) SendPart(ctx context.Context, number int, r io.ReaderAt, off, n int64) (string, error) {
	tag, err := u.PartUpload.SendPart(ctx, number, r, off, n)
	if err == nil {
		u.b.m.bytes.WithLabelValues("put", "sent").Add(float64(n))
	}
	return tag, err
}

func (u *partsCounted) Complete(ctx context.Context, tags []string, size int64, opt backend.CompleteOptions) (backend.ObjectInfo, error) {
	oi, err := u.PartUpload.Complete(ctx, tags, size, opt)
	u.b.m.done("put", u.start, err)
	return oi, err
}
