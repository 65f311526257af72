package main

import (
	"fmt"
	"io"
	"slices"
)

// report is the soak's outcome.
type report struct {
	Config    string       `json:"config"`
	Files     int          `json:"files"`
	DataBytes int64        `json:"data_bytes"`
	Phases    []phaseStats `json:"phases"`
	Idle      []sample     `json:"idle"` // before the load and after each phase
	Samples   []sample     `json:"samples"`
	PeakRSS   int64        `json:"peak_rss_bytes"`
	PeakAnon  int64        `json:"peak_rss_anon_bytes"`
	// MaxGapS is the longest time between two samples taken every 2 s: a
	// long one means the machine (not only the mount) stalled.
	MaxGapS      float64  `json:"max_sample_gap_s"`
	LoadAvgStart string   `json:"loadavg_start"`
	LoadAvg      string   `json:"loadavg_end"`
	Log          string   `json:"strata_log,omitempty"` // kept on failure
	Failures     []string `json:"failures"`
}

// Leak allowances from one idle point to the last: a connection or two
// opened by a late fetch, the runtime's own goroutines and threads.
const (
	fdSlack        = 16
	goroutineSlack = 64
	// Threads: Go keeps the threads that blocking syscalls needed, so the
	// count is a high-water mark; it must stay bounded, not flat.
	maxThreads = 256
	// Cache files of unopened objects stay open (cache.Options.IdleObjects).
	maxCacheFDs = 4096 + fdSlack
	// slowRead: no read may take longer, whatever the load.
	slowRead = 120 * 1000 // ms
)

// evaluate fills PeakRSS and Failures.
func (r *report) evaluate(c config) {
	fail := func(f string, a ...any) { r.Failures = append(r.Failures, fmt.Sprintf(f, a...)) }
	for i, p := range r.Phases {
		if p.WrongBytes > 0 {
			fail("phase %d: %d reads returned wrong bytes", i+1, p.WrongBytes)
		}
		if p.Errors > 0 {
			fail("phase %d: %d reads failed (%s)", i+1, p.Errors, p.FirstError)
		}
		if p.Reads == 0 {
			fail("phase %d: no reads", i+1)
		}
		if p.SlowestMS > slowRead {
			fail("phase %d: a read took %d s", i+1, p.SlowestMS/1000)
		}
	}
	all := append(append([]sample(nil), r.Samples...), r.Idle...)
	for i, s := range all {
		r.PeakRSS = max(r.PeakRSS, s.RSS)
		r.PeakAnon = max(r.PeakAnon, s.RSSAnon)
		if i > 0 && i < len(r.Samples) {
			r.MaxGapS = max(r.MaxGapS, s.At-all[i-1].At)
		}
		if s.Threads > maxThreads {
			fail("%d threads at %.0f s", s.Threads, s.At)
		}
		if s.CacheFDs > maxCacheFDs {
			fail("%d cache files open at %.0f s", s.CacheFDs, s.At)
		}
	}
	if limit := c.memoryLimit + c.rssAllowance; r.PeakAnon > limit {
		fail("peak anonymous RSS %d MiB above the memory limit %d MiB + %d MiB", r.PeakAnon>>20, c.memoryLimit>>20, c.rssAllowance>>20)
	}
	// Flat: the RSS of the last phase against the first (after warm-up).
	if first, last := phaseRSS(r, 1), phaseRSS(r, len(r.Phases)); first > 0 && last > first+first/4+32<<20 {
		fail("anonymous RSS grew from %d MiB (phase 1 median) to %d MiB (phase %d median)", first>>20, last>>20, len(r.Phases))
	}
	// Leaks: from the idle point after phase 1 (pools filled) to the last.
	if len(r.Idle) >= 3 {
		a, z := r.Idle[1], r.Idle[len(r.Idle)-1]
		if other := z.FDs - z.CacheFDs; other > a.FDs-a.CacheFDs+fdSlack {
			fail("descriptors other than cache files grew from %d to %d between idle points", a.FDs-a.CacheFDs, other)
		}
		if a.Goroutines >= 0 && z.Goroutines > a.Goroutines+goroutineSlack {
			fail("goroutines grew from %d to %d between idle points", a.Goroutines, z.Goroutines)
		}
		if z.Goroutines < 0 {
			fail("no goroutine count: the mount's --metrics-addr did not answer")
		}
	}
}

// phaseRSS is the median anonymous RSS sampled during phase n (1-based): samples
// between idle points n-1 and n.
func phaseRSS(r *report, n int) int64 {
	if n < 1 || n >= len(r.Idle) {
		return 0
	}
	from, to := r.Idle[n-1].At, r.Idle[n].At
	var v []int64
	for _, s := range r.Samples {
		if s.Label == "" && s.At > from && s.At < to {
			v = append(v, s.RSSAnon)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "soak: %s; %d files, %d MiB\n", r.Config, r.Files, r.DataBytes>>20)
	var wrong, reads int64
	for i, p := range r.Phases {
		fmt.Fprintf(w, "  phase %d: %s\n", i+1, p)
		wrong += p.WrongBytes
		reads += p.Reads
	}
	fmt.Fprintf(w, "  %-14s %8s %9s %8s %6s %10s %10s\n", "idle point", "RSS MiB", "anon MiB", "threads", "fds", "cache fds", "goroutines")
	for _, s := range r.Idle {
		fmt.Fprintf(w, "  %-14s %8d %9d %8d %6d %10d %10d\n", s.Label, s.RSS>>20, s.RSSAnon>>20, s.Threads, s.FDs, s.CacheFDs, s.Goroutines)
	}
	fmt.Fprintf(w, "  load average %s at the start, %s at the end; longest gap between samples %.0f s\n", r.LoadAvgStart, r.LoadAvg, r.MaxGapS)
	fmt.Fprintf(w, "  peak RSS %d MiB (anonymous %d MiB); anonymous RSS median by phase:", r.PeakRSS>>20, r.PeakAnon>>20)
	for n := 1; n <= len(r.Phases); n++ {
		fmt.Fprintf(w, " %d MiB", phaseRSS(r, n)>>20)
	}
	fmt.Fprintf(w, "\n  %d reads, %d with wrong bytes\n", reads, wrong)
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "soak: PASS")
		return
	}
	for _, f := range r.Failures {
		fmt.Fprintln(w, "  FAIL:", f)
	}
	if r.Log != "" {
		fmt.Fprintln(w, "  the mount's log:", r.Log)
	}
	fmt.Fprintln(w, "soak: FAIL")
}
