package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/strata/backend/shared"
)

// Series of the shared cache tier (--shared-cache), by tier where a tier
// applies: "shared" is the second tier, "origin" the bucket behind it.
// Comparing the two shows the origin traffic the tier saved.
var (
	tierRequestsDesc = prometheus.NewDesc("strata_tier_requests_total", "GETs sent to a tier (shared: lookups; origin: reads of blocks the tier did not have).", []string{"tier"}, nil)
	tierBytesDesc    = prometheus.NewDesc("strata_tier_read_bytes_total", "Bytes read from a tier.", []string{"tier"}, nil)
	tierErrorsDesc   = prometheus.NewDesc("strata_tier_errors_total", "Requests to a tier that failed (unreachable, timed out, refused).", []string{"tier"}, nil)
	tierLatencyDesc  = prometheus.NewDesc("strata_tier_request_duration_seconds", "Time to the response headers of a GET, by tier.", []string{"tier"}, nil)

	sharedSeries = []struct {
		desc *prometheus.Desc
		typ  prometheus.ValueType
		get  func(s *shared.Snapshot) float64
	}{
		{prometheus.NewDesc("strata_shared_hit_blocks_total", "Blocks served by the shared tier.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.HitBlocks) }},
		{prometheus.NewDesc("strata_shared_hit_bytes_total", "Bytes served by the shared tier.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.HitBytes) }},
		{prometheus.NewDesc("strata_shared_miss_blocks_total", "Blocks the shared tier did not have (read from the origin).", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.MissBlocks) }},
		{prometheus.NewDesc("strata_shared_miss_bytes_total", "Bytes read from the origin for blocks the shared tier did not have.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.MissBytes) }},
		{prometheus.NewDesc("strata_shared_bypassed_bytes_total", "Bytes read from the origin without asking the shared tier (breaker open).", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.BypassedBytes) }},
		{prometheus.NewDesc("strata_shared_bad_entries_total", "Shared entries ignored as corrupt, foreign or truncated (refetched from the origin).", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.BadEntries) }},
		{prometheus.NewDesc("strata_shared_forged_entries_total", "Shared entries refused because their signature does not verify with --shared-cache-key-file (forged, or written with another key); refetched from the origin, never served.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.ForgedEntries) }},
		{prometheus.NewDesc("strata_shared_writes_total", "Objects written to the shared tier.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.Writes) }},
		{prometheus.NewDesc("strata_shared_write_bytes_total", "Bytes written to the shared tier.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.WriteBytes) }},
		{prometheus.NewDesc("strata_shared_writes_dropped_total", "Blocks not written to the shared tier (buffer full, tier down): reads are never slowed for it.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.WritesDropped) }},
		{prometheus.NewDesc("strata_shared_write_errors_total", "Writes to the shared tier that failed.", nil, nil), prometheus.CounterValue, func(s *shared.Snapshot) float64 { return float64(s.WriteErrors) }},
		{prometheus.NewDesc("strata_shared_write_buffer_bytes", "Memory held for blocks waiting to be written to the shared tier.", nil, nil), prometheus.GaugeValue, func(s *shared.Snapshot) float64 { return float64(s.WriteBufferBytes) }},
		{prometheus.NewDesc("strata_shared_breaker_open", "1 while reads skip a failing shared tier.", nil, nil), prometheus.GaugeValue, func(s *shared.Snapshot) float64 {
			if s.BreakerOpen {
				return 1
			}
			return 0
		}},
	}
)

// collectShared emits the shared tier's series, if there is a tier.
func collectShared(ch chan<- prometheus.Metric, st *shared.Stats) {
	if st == nil {
		return
	}
	snap := st.Snapshot()
	for _, s := range sharedSeries {
		ch <- prometheus.MustNewConstMetric(s.desc, s.typ, s.get(&snap))
	}
	for _, t := range []struct {
		name string
		snap shared.TierSnapshot
	}{{"shared", snap.Shared}, {"origin", snap.Origin}} {
		ch <- prometheus.MustNewConstMetric(tierRequestsDesc, prometheus.CounterValue, float64(t.snap.Requests), t.name)
		ch <- prometheus.MustNewConstMetric(tierBytesDesc, prometheus.CounterValue, float64(t.snap.Bytes), t.name)
		ch <- prometheus.MustNewConstMetric(tierErrorsDesc, prometheus.CounterValue, float64(t.snap.Errors), t.name)
		h := t.snap.Latency
		buckets := map[float64]uint64{}
		var cum uint64
		for i, b := range h.Bounds {
			cum += uint64(h.Counts[i])
			buckets[b] = cum
		}
		total := cum + uint64(h.Counts[len(h.Counts)-1])
		ch <- prometheus.MustNewConstHistogram(tierLatencyDesc, total, h.SumSeconds, buckets, t.name)
	}
}
