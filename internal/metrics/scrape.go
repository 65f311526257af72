package metrics

import (
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	for _, d := range []*prometheus.Desc{tierRequestsDesc, tierBytesDesc, tierErrorsDesc, tierLatencyDesc} {
		ch <- d
	}
	for _, s := range sharedSeries {
		ch <- s.desc
	}
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
	collectShared(ch, src.Shared)
}

// Sample is one value of a strata_* series: Name includes the labels in
// the exposition format (strata_backend_requests_total{op="read",status="ok"});
// histograms and summaries give their _count and _sum.
type Sample struct {
	Name  string
	Value float64
}

// Snapshot gathers every strata_* series now, sorted by name (for the
// SIGUSR1 dump and `strata cache stats` on a running mount).
func (m *Metrics) Snapshot() ([]Sample, error) {
	fams, err := m.reg.Gather()
	var out []Sample
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "strata_") || name == "strata_mount_info" {
			continue
		}
		for _, mt := range f.GetMetric() {
			lbl := labelString(mt.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, Sample{name + lbl, mt.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				out = append(out, Sample{name + lbl, mt.GetGauge().GetValue()})
			case dto.MetricType_HISTOGRAM:
				h := mt.GetHistogram()
				out = append(out, Sample{name + "_count" + lbl, float64(h.GetSampleCount())}, Sample{name + "_sum" + lbl, h.GetSampleSum()})
			case dto.MetricType_SUMMARY:
				s := mt.GetSummary()
				out = append(out, Sample{name + "_count" + lbl, float64(s.GetSampleCount())}, Sample{name + "_sum" + lbl, s.GetSampleSum()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.GetName() + "=" + strconv.Quote(l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}
