package metrics

import (
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

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
