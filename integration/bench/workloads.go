package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// Workload is one benchmark of issue #3 (and later ones). It runs its
// phases against a filesystem (local directory or mount) and, where it
// makes sense, against the plain GET client.
type Workload interface {
	Name() string
	// Title heads the workload's table.
	Title(c Config) string
	// Unit is the headline rate's unit.
	Unit() string
	// AddData adds the dataset part the workload reads.
	AddData(d *workload.Dataset, s Scale)
	// Prefix is where that part lives (a top-level prefix).
	Prefix(s Scale) string
	// RunFS measures a filesystem presenting the prefix, starting with an
	// empty cache.
	RunFS(ctx context.Context, p *Phases, fs FS) error
	// RunClient measures the GET client; workloads without a client
	// equivalent return nil without adding rows.
	RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error
}

// allWorkloads lists the workloads in report order.
func allWorkloads() []Workload {
	return []Workload{imageFolder{}, sequential{}, random{}, listing{}}
}

func workloadNames() []string {
	var out []string
	for _, w := range allWorkloads() {
		out = append(out, w.Name())
	}
	return out
}

// Phases collects the rows of one workload on one system at one latency.
type Phases struct {
	env  *Env
	wl   Workload
	sys  System
	lat  string
	rows []Row
	logf func(string, ...any)
}

// rateFunc picks a summary's headline figure.
type rateFunc func(workload.Summary) float64

func perSecond(s workload.Summary) float64   { return s.OpsPerSec() }
func mbPerSecond(s workload.Summary) float64 { return s.MBps() }

// Measure runs one timed phase: the page cache is dropped first, cache
// counters (strata) are read around it, and a row is recorded, also on
// failure (the error is returned so the workload stops on this system).
func (p *Phases) Measure(ctx context.Context, phase string, fs FS, rate rateFunc, fn func(context.Context) (workload.Summary, error)) error {
	p.env.Drop()
	var before *workload.CacheStats
	if fs != nil {
		before, _ = fs.Stats(ctx, time.Now())
	}
	s, err := fn(ctx)
	row := Row{Workload: p.wl.Name(), Phase: phase, Latency: p.lat, System: p.sys.Name, Role: p.sys.Role,
		Unit: p.wl.Unit(), Summary: s}
	if err != nil {
		row.Err = err.Error()
		p.rows = append(p.rows, row)
		p.logf("  %-8s %-5s %-22s FAILED: %v", p.sys.Name, p.lat, phase, err)
		return fmt.Errorf("%s %s: %w", p.wl.Name(), phase, err)
	}
	row.Rate = rate(s)
	if fs != nil && before != nil {
		if after, err := fs.Stats(ctx, time.Now()); err == nil && after != nil {
			row.Note = cacheNote(after.Sub(*before), s.Bytes)
		} else if err != nil {
			row.Note = "stats: " + err.Error()
		}
	}
	if s.Truncated {
		row.Note = joinNote(row.Note, fmt.Sprintf("stopped at the %s cap", p.env.Cfg.Scale.PhaseCap))
	}
	p.rows = append(p.rows, row)
	p.logf("  %-8s %-5s %-22s %10.1f %-9s %s", p.sys.Name, p.lat, phase, row.Rate, row.Unit, s)
	return nil
}

// Progress logs an untimed step.
func (p *Phases) Progress(format string, args ...any) {
	p.logf("  %-8s %-5s "+format, append([]any{p.sys.Name, p.lat}, args...)...)
}

// Cap is the per-phase duration cap.
func (p *Phases) Cap() time.Duration { return p.env.Cfg.Scale.PhaseCap }

// Env is the benchmark environment.
func (p *Phases) Env() *Env { return p.env }

// cacheNote summarises strata's counters over a phase that read bytes.
func cacheNote(d workload.CacheStats, read int64) string {
	s := d.Session
	var parts []string
	if read > 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% from cache", 100*d.ServedRatio(read)))
	}
	parts = append(parts, "fetched "+workload.FormatSize(s.FetchedBytes))
	if s.Opens > 0 {
		parts = append(parts, fmt.Sprintf("passthrough %d/%d opens", s.PassthroughOpens, s.Opens))
	}
	return strings.Join(parts, ", ")
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
