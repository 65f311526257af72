package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend/shared"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/prefetch"
)

// Sources are the live objects of a mount whose counters are read at
// scrape time. Any of them may be nil (not built yet, or not part of this
// process, as in an offline `strata warm`).
type Sources struct {
	FS      *fs.FS
	Fetcher *prefetch.Fetcher
	Store   *cache.Store
	Shared  *shared.Stats // nil without --shared-cache
}

// UploadQueue is what the write path reports about uploads not yet in the
// bucket.
type UploadQueue struct {
	Objects   int64         // files closed but not yet uploaded
	Bytes     int64         // their bytes
	OldestAge time.Duration // how long the oldest has waited
}

// Info labels the strata_mount_info series.
type Info struct {
	Version  string
	Source   string // backend.String(): no secrets
	Mount    string
	IOEngine string
}

// Metrics is the registry of one mount. Safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	fuse    *fuseMetrics
	backend *backendMetrics

	sources atomic.Pointer[Sources]
	upload  atomic.Pointer[func() UploadQueue]
	info    atomic.Pointer[Info]
}

// New returns a registry with the Go runtime and process collectors, the
// scrape-time collector of Sources and the instrumented FUSE and backend
// series.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.fuse = newFuseMetrics()
	m.backend = newBackendMetrics()
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.fuse.ops, m.fuse.latency,
		m.backend.requests, m.backend.latency, m.backend.bytes, m.backend.bodyErrors,
		&statsCollector{m: m},
	)
	return m
}

// Registry exposes the registry (tests, extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetSources attaches the mount's live objects.
func (m *Metrics) SetSources(s Sources) { m.sources.Store(&s) }

// SetInfo sets the labels of strata_mount_info.
func (m *Metrics) SetInfo(i Info) { m.info.Store(&i) }

// SetUploadQueue registers the function the upload-queue gauges read at
// each scrape. Until it is called they read zero.
func (m *Metrics) SetUploadQueue(fn func() UploadQueue) {
	if fn == nil {
		m.upload.Store(nil)
		return
	}
	m.upload.Store(&fn)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Server is a running metrics endpoint.
type Server struct {
	Addr string // the address it listens on (the real port when :0 was asked)
	srv  *http.Server
	done chan struct{}
	once sync.Once
}

// Listen serves /metrics on addr. It returns once the socket is bound, so
// a taken port fails the mount instead of a later log line.
func (m *Metrics) Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "strata: metrics at /metrics")
	})
	s := &Server{
		Addr: ln.Addr().String(),
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns ErrServerClosed after Close
	}()
	return s, nil
}

// Close stops the endpoint, letting a scrape in progress finish briefly.
func (s *Server) Close() {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
		<-s.done
	})
}

func goVersion() string { return runtime.Version() }

// fuseMetrics count FUSE operations by name and result, and time them.
type fuseMetrics struct {
	ops      *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	children sync.Map // fuseKey -> *fuseChild
}

type fuseKey struct {
	op    string
	errno syscall.Errno
}

// fuseChild is one prepared (op, result) pair, so the hot path does no
// label hashing.
type fuseChild struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

// fuseBuckets: 10µs (a cached getattr) to about 2.6 s (a cold read behind
// a slow bucket), by factors of 4.
var fuseBuckets = prometheus.ExponentialBuckets(10e-6, 4, 10)

func newFuseMetrics() *fuseMetrics {
	return &fuseMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_fuse_ops_total",
			Help: "FUSE operations served, by operation and result (ok or the errno name).",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_fuse_op_duration_seconds",
			Help:    "Time to serve a FUSE operation, by operation.",
			Buckets: fuseBuckets,
		}, []string{"op"}),
	}
}

// ObserveFUSE records one FUSE operation. It has the signature of
// fs.Options.Observe.
func (m *Metrics) ObserveFUSE(op string, d time.Duration, errno syscall.Errno) {
	k := fuseKey{op, errno}
	c, ok := m.fuse.children.Load(k)
	if !ok {
		c, _ = m.fuse.children.LoadOrStore(k, &fuseChild{
			count: m.fuse.ops.WithLabelValues(op, resultLabel(errno)),
			dur:   m.fuse.latency.WithLabelValues(op),
		})
	}
	ch := c.(*fuseChild)
	ch.count.Inc()
	ch.dur.Observe(d.Seconds())
}

// resultLabel is "ok" or the errno's name (ENOENT, EIO, ...).
func resultLabel(errno syscall.Errno) string {
	if errno == 0 {
		return "ok"
	}
	if name := unix.ErrnoName(errno); name != "" {
		return name
	}
	return "errno_other"
}
