package workload

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary is the measured outcome of one timed phase: a number of
// operations (files read whole, preads, directory entries) and the bytes
// they moved, over a wall-clock interval, with per-operation latencies.
type Summary struct {
	// Ops counts completed operations; Bytes the bytes they read.
	Ops   int64 `json:"ops"`
	Bytes int64 `json:"bytes"`
	// Elapsed is the wall time from the first worker's start to the last
	// worker's end.
	Elapsed time.Duration `json:"elapsed_ns"`
	// P50, P99 and Max are per-operation latencies (zero if none recorded).
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// Procs is the number of reader processes.
	Procs int `json:"procs"`
	// Truncated reports that the phase hit its duration cap before doing
	// every planned operation: the rates are over what was done.
	Truncated bool `json:"truncated,omitempty"`
	// Verified counts files whose sha256 was checked and matched.
	Verified int64 `json:"verified,omitempty"`
	// Note is what the workload adds to its row (close() latency, say).
	Note string `json:"note,omitempty"`
	// CPUBusy is the share of the machine's CPU time (every core) that was
	// busy while the run went on, 0 to 1 (CPUTimes.BusyShare), set by the
	// bench around each run of at least cpuMinRun; 0: not measured.
	CPUBusy float64 `json:"cpu_busy,omitempty"`
}

// OpsPerSec is Ops divided by Elapsed (0 if nothing was timed).
func (s Summary) OpsPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// MBps is Bytes in MB (10^6) per second of Elapsed.
func (s Summary) MBps() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Bytes) / 1e6 / s.Elapsed.Seconds()
}

// String is a one-line human summary.
func (s Summary) String() string {
	out := fmt.Sprintf("%d ops in %s: %.0f ops/s, %.1f MB/s, p50 %s, p99 %s",
		s.Ops, s.Elapsed.Round(time.Millisecond), s.OpsPerSec(), s.MBps(),
		FormatLatency(s.P50), FormatLatency(s.P99))
	if s.Truncated {
		out += " (stopped at the time cap)"
	}
	return out
}

// Percentile returns the q-th percentile (0 < q <= 100) of sorted by the
// nearest-rank method: the smallest value such that at least q% of the
// values are less than or equal to it. It returns 0 for no values.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(q / 100 * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

// Summarize builds a Summary from worker results: elapsed is the span from
// the earliest start to the latest end, and latencies are pooled.
func Summarize(results []WorkerResult) Summary {
	var s Summary
	var lat []time.Duration
	var start, end int64
	for i, r := range results {
		s.Ops += r.Ops
		s.Bytes += r.Bytes
		s.Verified += r.Verified
		s.Truncated = s.Truncated || r.Truncated
		if i == 0 || r.StartNS < start {
			start = r.StartNS
		}
		if i == 0 || r.EndNS > end {
			end = r.EndNS
		}
		for _, l := range r.LatNS {
			lat = append(lat, time.Duration(l))
		}
	}
	s.Procs = len(results)
	if end > start {
		s.Elapsed = time.Duration(end - start)
	}
	s.fillLatencies(lat)
	return s
}

// SummarizeLatencies builds a Summary from latencies measured in this
// process (the GET client), with the given elapsed time and bytes.
func SummarizeLatencies(lat []time.Duration, bytes int64, elapsed time.Duration, procs int) Summary {
	s := Summary{Ops: int64(len(lat)), Bytes: bytes, Elapsed: elapsed, Procs: procs}
	s.fillLatencies(slices.Clone(lat))
	return s
}

func (s *Summary) fillLatencies(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	s.P50 = Percentile(lat, 50)
	s.P99 = Percentile(lat, 99)
	s.Max = lat[len(lat)-1]
}

// FormatLatency prints a latency with three significant figures in a unit
// that suits it ("85µs", "1.20ms", "2.31s"); zero prints as "-".
func FormatLatency(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// FormatSize prints a byte count in binary units ("128KiB", "1GiB",
// "1.5GiB").
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f%s", v, units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
