package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// CacheStats is `strata cache stats --json`.
type CacheStats struct {
	SizeBytes int64 `json:"size_bytes"`
	Objects   int64 `json:"objects"`
	Blocks    int64 `json:"blocks"`
	Session   struct {
		Running      bool      `json:"running"`
		Updated      time.Time `json:"updated"`
		Passthrough  bool      `json:"passthrough"`
		HitBytes     int64     `json:"hit_bytes"`
		MissBytes    int64     `json:"miss_bytes"`
		FetchedBytes int64     `json:"fetched_bytes"`
		HitOps       int64     `json:"hit_ops"`
		MissOps      int64     `json:"miss_ops"`
		// Opens and PassthroughOpens are reported by strata beyond the
		// documented contract (zero when absent). A passthrough open of a
		// fully cached file counts as one hit of the file's size (its
		// reads never reach strata); reads served from blocks prefetched
		// in the run are prefetch hits, neither hits nor misses.
		Opens            int64 `json:"opens"`
		PassthroughOpens int64 `json:"passthrough_opens"`
		// Reads are the FUSE READ requests the daemon answered (none for
		// files the kernel reads by passthrough).
		Reads            int64 `json:"reads"`
		PrefetchHitBytes int64 `json:"prefetch_hit_bytes"`
	} `json:"session"`
}

// HitRatio is hit bytes over all bytes served (hit, prefetch hit and miss)
// of the session, as strata counts them (0 when nothing was counted).
func (c CacheStats) HitRatio() float64 {
	total := c.Session.HitBytes + c.Session.PrefetchHitBytes + c.Session.MissBytes
	if total == 0 {
		return 0
	}
	return float64(c.Session.HitBytes) / float64(total)
}

// ServedRatio is the share of read bytes that did not have to be fetched:
// 1 - fetched/read, within [0, 1]. Unlike HitRatio it also covers reads
// the kernel served from cache files by passthrough.
func (c CacheStats) ServedRatio(read int64) float64 {
	if read <= 0 {
		return 0
	}
	return min(1, max(0, 1-float64(c.Session.FetchedBytes)/float64(read)))
}

// Sub returns the session counters of c minus those of earlier (the
// activity between two snapshots of one mount).
func (c CacheStats) Sub(earlier CacheStats) CacheStats {
	d := c
	d.Session.HitBytes -= earlier.Session.HitBytes
	d.Session.MissBytes -= earlier.Session.MissBytes
	d.Session.PrefetchHitBytes -= earlier.Session.PrefetchHitBytes
	d.Session.FetchedBytes -= earlier.Session.FetchedBytes
	d.Session.HitOps -= earlier.Session.HitOps
	d.Session.MissOps -= earlier.Session.MissOps
	d.Session.Opens -= earlier.Session.Opens
	d.Session.PassthroughOpens -= earlier.Session.PassthroughOpens
	d.Session.Reads -= earlier.Session.Reads
	return d
}

// Add returns the session counters of c plus those of other (the
// activity of two mounts of one cache, one after the other); the cache's
// size is c's.
func (c CacheStats) Add(other CacheStats) CacheStats {
	d := c
	d.Session.HitBytes += other.Session.HitBytes
	d.Session.MissBytes += other.Session.MissBytes
	d.Session.PrefetchHitBytes += other.Session.PrefetchHitBytes
	d.Session.FetchedBytes += other.Session.FetchedBytes
	d.Session.HitOps += other.Session.HitOps
	d.Session.MissOps += other.Session.MissOps
	d.Session.Opens += other.Session.Opens
	d.Session.PassthroughOpens += other.Session.PassthroughOpens
	d.Session.Reads += other.Session.Reads
	return d
}

// StrataStats runs `strata cache stats --cache-dir dir --json`.
func StrataStats(ctx context.Context, bin, cacheDir string) (CacheStats, error) {
	var cs CacheStats
	out, err := exec.CommandContext(ctx, bin, "cache", "stats", "--cache-dir", cacheDir, "--json").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return cs, fmt.Errorf("workload: strata cache stats: %w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return cs, fmt.Errorf("workload: strata cache stats: %w", err)
	}
	if err := json.Unmarshal(out, &cs); err != nil {
		return cs, fmt.Errorf("workload: strata cache stats: %w: %q", err, firstLine(string(out)))
	}
	return cs, nil
}

// StrataStatsAfter is StrataStats once the session counters are at least
// as recent as t (a running mount refreshes them every few seconds), or
// after 10 seconds with whatever is there.
func StrataStatsAfter(ctx context.Context, bin, cacheDir string, t time.Time) (CacheStats, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := StrataStats(ctx, bin, cacheDir)
		if err != nil || !cs.Session.Running || !cs.Session.Updated.Before(t) || time.Now().After(deadline) {
			return cs, err
		}
		select {
		case <-ctx.Done():
			return cs, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
