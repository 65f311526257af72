package metrics

import (
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

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
