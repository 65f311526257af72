package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	windowDesc = prometheus.NewDesc("strata_prefetch_window_bytes",
		"Readahead window at each sequential top-up (sum/count is the mean window).", nil, nil)
	uploadObjectsDesc = prometheus.NewDesc("strata_upload_queue_objects",
		"Files written and closed but not yet in the bucket.", nil, nil)
	uploadBytesDesc = prometheus.NewDesc("strata_upload_queue_bytes",
		"Bytes of the files waiting for upload.", nil, nil)
	uploadAgeDesc = prometheus.NewDesc("strata_upload_queue_oldest_seconds",
		"How long the oldest file waiting for upload has waited.", nil, nil)
	infoDesc = prometheus.NewDesc("strata_mount_info",
		"Always 1; labels describe the mount.", []string{"version", "go_version", "source", "mountpoint", "io_engine"}, nil)
)

// statsCollector reads the Sources' counters at scrape time.
type statsCollector struct{ m *Metrics }

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range stats {
		ch <- s.desc
	}
	ch <- windowDesc
	ch <- uploadObjectsDesc
	ch <- uploadBytesDesc
	ch <- uploadAgeDesc
	ch <- infoDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	if info := c.m.info.Load(); info != nil {
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1,
			info.Version, goVersion(), info.Source, info.Mount, info.IOEngine)
	}
	var q UploadQueue
	if fn := c.m.upload.Load(); fn != nil {
		q = (*fn)()
	}
	ch <- prometheus.MustNewConstMetric(uploadObjectsDesc, prometheus.GaugeValue, float64(q.Objects))
	ch <- prometheus.MustNewConstMetric(uploadBytesDesc, prometheus.GaugeValue, float64(q.Bytes))
	ch <- prometheus.MustNewConstMetric(uploadAgeDesc, prometheus.GaugeValue, q.OldestAge.Seconds())

	src := c.m.sources.Load()
	if src == nil {
		return
	}
	for _, s := range stats {
		if v, ok := s.value(src); ok {
			ch <- prometheus.MustNewConstMetric(s.desc, s.typ, v)
		}
	}
	if f := src.Fetcher; f != nil {
		st := f.Stats()
		ch <- prometheus.MustNewConstSummary(windowDesc, uint64(st.WindowTopUps.Load()), float64(st.WindowBytes.Load()), nil)
	}
}
