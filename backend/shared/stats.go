package shared

import (
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of the latency histograms' buckets,
// in seconds (Prometheus "le"); a last implicit bucket holds the rest.
var LatencyBounds = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}

// Histogram counts durations into LatencyBounds. Safe for concurrent use.
type Histogram struct {
	counts [13]atomic.Int64 // len(LatencyBounds)+1
	sumNs  atomic.Int64
}

// Observe adds one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(LatencyBounds) && s > LatencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// HistogramSnapshot is a histogram at one moment: Counts[i] is the number
// of observations in bucket i (not cumulative), the last one above every
// bound.
type HistogramSnapshot struct {
	Bounds     []float64 `json:"bounds_seconds"`
	Counts     []int64   `json:"counts"`
	SumSeconds float64   `json:"sum_seconds"`
}

// Snapshot copies the histogram.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Bounds: LatencyBounds, Counts: make([]int64, len(h.counts))}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.SumSeconds = time.Duration(h.sumNs.Load()).Seconds()
	return s
}

// TierStats are one tier's request counters.
type TierStats struct {
	Requests atomic.Int64 // GETs sent (lookups, for the shared tier)
	Bytes    atomic.Int64 // bytes read from it (record headers included)
	Errors   atomic.Int64 // requests that failed: unreachable, timed out, refused
	Latency  Histogram    // time to the response headers of a GET
}

// Stats are a Tier's counters, safe to read at any time. Blocks are cache
// blocks: every block the fetcher asks for is a hit (served by the shared
// tier), a miss (served by the origin) or bypassed (the tier was not
// consulted: breaker open, unversioned or unaligned read).
type Stats struct {
	Shared TierStats
	Origin TierStats

	HitBlocks, HitBytes           atomic.Int64
	MissBlocks, MissBytes         atomic.Int64
	BypassedBlocks, BypassedBytes atomic.Int64
	// BadEntries counts records ignored as corrupt, foreign or truncated.
	BadEntries atomic.Int64
	// ForgedEntries counts the BadEntries of a signed tier whose bytes
	// were intact but whose signature did not verify: forged entries.
	ForgedEntries atomic.Int64

	// Writes are shared objects written; WriteBytes their size.
	Writes, WriteBytes atomic.Int64
	// WritesDropped counts blocks not written: no buffer budget, queue
	// full, incomplete group, tier down, or shutting down.
	WritesDropped atomic.Int64
	// WriteErrors counts PUTs that failed.
	WriteErrors atomic.Int64
	// Repairs counts groups rewritten after a bad entry was found.
	Repairs atomic.Int64
	// WriteBufferBytes is the memory held for writes now (a gauge).
	WriteBufferBytes atomic.Int64

	// BreakerOpen is 1 while the breaker keeps reads off the tier.
	BreakerOpen atomic.Int64
	// BreakerTrips counts the times it opened.
	BreakerTrips atomic.Int64
}

// TierSnapshot is TierStats at one moment.
type TierSnapshot struct {
	Requests int64             `json:"requests"`
	Bytes    int64             `json:"bytes"`
	Errors   int64             `json:"errors"`
	Latency  HistogramSnapshot `json:"latency"`
}

func (t *TierStats) snapshot() TierSnapshot {
	return TierSnapshot{Requests: t.Requests.Load(), Bytes: t.Bytes.Load(), Errors: t.Errors.Load(), Latency: t.Latency.Snapshot()}
}

// Snapshot is Stats at one moment, for JSON and metrics exporters.
type Snapshot struct {
	Shared           TierSnapshot `json:"shared"`
	Origin           TierSnapshot `json:"origin"`
	HitBlocks        int64        `json:"hit_blocks"`
	HitBytes         int64        `json:"hit_bytes"`
	MissBlocks       int64        `json:"miss_blocks"`
	MissBytes        int64        `json:"miss_bytes"`
	BypassedBlocks   int64        `json:"bypassed_blocks"`
	BypassedBytes    int64        `json:"bypassed_bytes"`
	BadEntries       int64        `json:"bad_entries"`
	ForgedEntries    int64        `json:"forged_entries"`
	Writes           int64        `json:"writes"`
	WriteBytes       int64        `json:"write_bytes"`
	WritesDropped    int64        `json:"writes_dropped"`
	WriteErrors      int64        `json:"write_errors"`
	Repairs          int64        `json:"repairs"`
	WriteBufferBytes int64        `json:"write_buffer_bytes"`
	BreakerOpen      bool         `json:"breaker_open"`
	BreakerTrips     int64        `json:"breaker_trips"`
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() Snapshot {
	return Snapshot{
		Shared: s.Shared.snapshot(), Origin: s.Origin.snapshot(),
		HitBlocks: s.HitBlocks.Load(), HitBytes: s.HitBytes.Load(),
		MissBlocks: s.MissBlocks.Load(), MissBytes: s.MissBytes.Load(),
		BypassedBlocks: s.BypassedBlocks.Load(), BypassedBytes: s.BypassedBytes.Load(),
		BadEntries: s.BadEntries.Load(), ForgedEntries: s.ForgedEntries.Load(), Writes: s.Writes.Load(), WriteBytes: s.WriteBytes.Load(),
		WritesDropped: s.WritesDropped.Load(), WriteErrors: s.WriteErrors.Load(), Repairs: s.Repairs.Load(),
		WriteBufferBytes: s.WriteBufferBytes.Load(), BreakerOpen: s.BreakerOpen.Load() == 1,
		BreakerTrips: s.BreakerTrips.Load(),
	}
}
