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
	Failures  []string     `json:"failures"`
}

// Leak allowances from one idle point to the last: a connection or two
// opened by a late fetch, the runtime's own goroutines and threads.
const (
	fdSlack        = 16
	goroutineSlack = 64
	threadSlack    = 16
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
	}
	for _, s := range r.Samples {
		r.PeakRSS = max(r.PeakRSS, s.RSS)
	}
	for _, s := range r.Idle {
		r.PeakRSS = max(r.PeakRSS, s.RSS)
	}
	if limit := c.memoryLimit + c.rssAllowance; r.PeakRSS > limit {
		fail("peak RSS %d MiB above the memory limit %d MiB + %d MiB", r.PeakRSS>>20, c.memoryLimit>>20, c.rssAllowance>>20)
	}
	// Flat: the RSS of the last phase against the first (after warm-up).
	if first, last := phaseRSS(r, 1), phaseRSS(r, len(r.Phases)); first > 0 && last > first+first/4+32<<20 {
		fail("RSS grew from %d MiB (phase 1 median) to %d MiB (phase %d median)", first>>20, last>>20, len(r.Phases))
	}
	// Leaks: from the idle point after phase 1 (pools filled) to the last.
	if len(r.Idle) >= 3 {
		a, z := r.Idle[1], r.Idle[len(r.Idle)-1]
		if z.FDs > a.FDs+fdSlack {
			fail("open descriptors grew from %d to %d between idle points", a.FDs, z.FDs)
		}
		if z.Threads > a.Threads+threadSlack {
			fail("threads grew from %d to %d between idle points", a.Threads, z.Threads)
		}
		if a.Goroutines >= 0 && z.Goroutines > a.Goroutines+goroutineSlack {
			fail("goroutines grew from %d to %d between idle points", a.Goroutines, z.Goroutines)
		}
		if z.Goroutines < 0 {
			fail("no goroutine count: the mount's --metrics-addr did not answer")
		}
	}
}

// phaseRSS is the median RSS sampled during phase n (1-based): samples
// between idle points n-1 and n.
func phaseRSS(r *report, n int) int64 {
	if n < 1 || n >= len(r.Idle) {
		return 0
	}
	from, to := r.Idle[n-1].At, r.Idle[n].At
	var v []int64
	for _, s := range r.Samples {
		if s.Label == "" && s.At > from && s.At < to {
			v = append(v, s.RSS)
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
	fmt.Fprintf(w, "  %-14s %8s %8s %6s %10s\n", "idle point", "RSS MiB", "threads", "fds", "goroutines")
	for _, s := range r.Idle {
		fmt.Fprintf(w, "  %-14s %8d %8d %6d %10d\n", s.Label, s.RSS>>20, s.Threads, s.FDs, s.Goroutines)
	}
	fmt.Fprintf(w, "  peak RSS %d MiB; RSS median by phase:", r.PeakRSS>>20)
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
	fmt.Fprintln(w, "soak: FAIL")
}
