package metrics

import (
	"testing"
	"time"

	"github.com/stratafs/strata/backend/shared"
)

func TestSharedTierSeries(t *testing.T) {
	m := New()
	var st shared.Stats
	st.HitBytes.Store(3 << 20)
	st.MissBytes.Store(1 << 20)
	st.BadEntries.Store(5)
	st.ForgedEntries.Store(2)
	st.Origin.Requests.Store(2)
	st.Shared.Requests.Store(7)
	st.Shared.Latency.Observe(3 * time.Millisecond)
	st.Shared.Latency.Observe(10 * time.Second)
	m.SetSources(Sources{Shared: &st})
	got := scrape(t, m)
	if v := got["strata_shared_hit_bytes_total"].GetMetric()[0].GetCounter().GetValue(); v != 3<<20 {
		t.Fatalf("hit bytes %v", v)
	}
	if v := got["strata_shared_forged_entries_total"].GetMetric()[0].GetCounter().GetValue(); v != 2 {
		t.Fatalf("forged entries %v", v)
	}
	byTier := map[string]float64{}
	for _, mt := range got["strata_tier_requests_total"].GetMetric() {
		byTier[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
	}
	if byTier["origin"] != 2 || byTier["shared"] != 7 {
		t.Fatalf("requests by tier %v", byTier)
	}
	for _, mt := range got["strata_tier_request_duration_seconds"].GetMetric() {
		if mt.GetLabel()[0].GetValue() == "shared" && mt.GetHistogram().GetSampleCount() != 2 {
			t.Fatalf("shared latency count %d", mt.GetHistogram().GetSampleCount())
		}
	}
	if _, ok := scrape(t, func() *Metrics { m := New(); m.SetSources(Sources{}); return m }())["strata_shared_hit_bytes_total"]; ok {
		t.Fatal("shared series without a shared tier")
	}
}
