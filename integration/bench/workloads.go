package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// Writer is implemented by workloads that write (a checkpoint benchmark):
// their mounts are read-write.
type Writer interface {
	Writable() bool
}

// Prerequisite is implemented by workloads that need more than the
// systems (the DataLoader needs Python with PyTorch). Prerequisites
// describes what it found for the report, or says why the workload cannot
// run: it is then skipped and the report says why.
type Prerequisite interface {
	Prerequisites(ctx context.Context) (string, error)
}

// OneLatency is implemented by workloads measured in the last latency
// block only (the checkpoint: its times are a local write and an upload of
// a few large parts, which an added round trip changes by well under 1%,
// and it is among the longest workloads).
type OneLatency interface {
	OneLatency() bool
}

// runsAt reports whether workload w is measured in latency block i of n.
func runsAt(w Workload, i, n int) bool {
	if ol, ok := w.(OneLatency); ok && ol.OneLatency() {
		return i == n-1
	}
	return true
}

// allWorkloads lists the workloads in report order.
func allWorkloads() []Workload {
	return []Workload{dataLoader{}, auResNet50, auUNet3D, imageFolder{}, sequential{}, tarShards{}, random{}, listingWide, listingDeep, checkpoint{}}
}

func workloadNames() []string {
	var out []string
	for _, w := range allWorkloads() {
		out = append(out, w.Name())
	}
	return out
}

// workloadSets are the selections -workloads takes by name besides single
// workloads (and "all"). training is issue #18's benchmark, what `make
// bench` runs: a training job's data loading, its accelerator utilisation
// and its checkpoints, with PyTorch. paths measures one read path at a
// time (small files, shards, random preads, listings: the targets of
// issues #14 and #15), what `make bench-paths` runs. Every workload is in
// exactly one of them.
var workloadSets = map[string][]string{
	"training": {"dataloader", "au-resnet50", "au-unet3d", "webdataset-py", "checkpoint"},
	"paths":    {"imagefolder", "webdataset", "random", "listing", "listing-deep"},
}

// expandSets replaces the set names in a comma list by their workloads.
func expandSets(list string) string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "all":
			out = append(out, workloadNames()...)
		case workloadSets[n] != nil:
			out = append(out, workloadSets[n]...)
		default:
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
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

// phaseFunc does one timed run of a phase; rep counts repetitions from 0
// (a new shuffle per repetition, say).
type phaseFunc func(ctx context.Context, rep int) (workload.Summary, error)

// Cold measures a phase that depends on the client's cache being empty:
// it runs once, except on systems without a cache (local disk, the GET
// client), where it is repeated like a warm phase.
func (p *Phases) Cold(ctx context.Context, phase string, fs FS, rate rateFunc, fn phaseFunc) error {
	n := 1
	if p.sys.Role == RoleLocal || p.sys.Role == RoleReference {
		n = p.env.Cfg.Repeat
	}
	return p.measure(ctx, phase, fs, rate, n, nil, fn)
}

// Warm measures a phase that leaves the state it found (a warm cache): it
// is repeated Config.Repeat times and the median run is reported.
func (p *Phases) Warm(ctx context.Context, phase string, fs FS, rate rateFunc, fn phaseFunc) error {
	return p.measure(ctx, phase, fs, rate, p.env.Cfg.Repeat, nil, fn)
}

// resetFunc brings a system back to a phase's starting state before run
// rep: a new mount, with the cache emptied (FS.Fresh) or kept
// (FS.Restart).
type resetFunc func(ctx context.Context, rep int) error

// Remounted measures a phase whose every run starts on a mount of its own
// (a cold epoch on an emptied cache, an epoch after a restart), Config.Repeat
// times on every system: reset remounts before each run it is asked to
// (untimed), and a run it leaves alone (the first cold epoch, say) must be
// on a mount the workload has just opened. Cache counters are then read
// after each run, over the mount's session.
func (p *Phases) Remounted(ctx context.Context, phase string, fs FS, rate rateFunc, reset resetFunc, fn phaseFunc) error {
	return p.measure(ctx, phase, fs, rate, p.env.Cfg.Repeat, reset, fn)
}

// measure runs a phase n times, each with the page cache dropped first,
// reads cache counters (strata) around the runs (after each run, when a
// reset remounts between runs), and records one row with the median run,
// also on failure (the error is returned so that the workload stops on
// this system).
func (p *Phases) measure(ctx context.Context, phase string, fs FS, rate rateFunc, n int, reset resetFunc, fn phaseFunc) error {
	n = max(n, 1)
	var before, counted *workload.CacheStats
	if fs != nil && reset == nil {
		before, _ = fs.Stats(ctx, time.Now())
	}
	row := Row{Workload: p.wl.Name(), Phase: phase, Latency: p.lat, System: p.sys.Name, Role: p.sys.Role, Unit: p.wl.Unit()}
	fail := func(s workload.Summary, err error) error {
		row.Summary = s
		row.Err = err.Error()
		p.rows = append(p.rows, row)
		p.logf("  %-8s %-5s %-22s FAILED: %v", p.sys.Name, p.lat, phase, err)
		return fmt.Errorf("%s %s: %w", p.wl.Name(), phase, err)
	}
	var runs []workload.Summary
	var read int64
	var statsErr error
	for i := 0; i < n; i++ {
		if reset != nil {
			if err := reset(ctx, i); err != nil {
				return fail(workload.Summary{}, fmt.Errorf("remount: %w", err))
			}
		}
		p.env.Drop()
		s, err := timedCPU(ctx, i, fn)
		if err != nil {
			return fail(s, err)
		}
		runs = append(runs, s)
		read += s.Bytes
		if fs != nil && reset != nil && statsErr == nil {
			// The session began with the run's mount: its counters are
			// the run's.
			var st *workload.CacheStats
			if st, statsErr = fs.Stats(ctx, time.Now()); st != nil && statsErr == nil {
				counted = addStats(counted, *st)
			}
		}
	}
	slices.SortStableFunc(runs, func(a, b workload.Summary) int { return cmp.Compare(rate(a), rate(b)) })
	row.Summary = runs[len(runs)/2]
	row.Rate = rate(row.Summary)
	if n > 1 {
		row.Note = fmt.Sprintf("median of %d (%s–%s)", n, formatRate(rate(runs[0])), formatRate(rate(runs[n-1])))
		for _, r := range runs {
			row.Runs = append(row.Runs, rate(r))
		}
	}
	if _, writes := p.wl.(Writer); fs != nil && before != nil && !writes {
		if after, err := fs.Stats(ctx, time.Now()); err == nil && after != nil {
			d := after.Sub(*before)
			counted = &d
		} else if err != nil {
			statsErr = err
		}
	}
	if counted != nil {
		row.Note = joinNote(row.Note, cacheNote(*counted, read))
	} else if statsErr != nil {
		row.Note = joinNote(row.Note, "stats: "+statsErr.Error())
	}
	row.Note = joinNote(row.Note, row.Summary.Note)
	if b := row.Summary.CPUBusy; b > 0 {
		row.Note = joinNote(row.Note, fmt.Sprintf("machine CPU %.0f%% busy", 100*b))
	}
	if row.Summary.Truncated {
		row.Note = joinNote(row.Note, fmt.Sprintf("stopped at the %s cap", p.env.Cfg.Scale.PhaseCap))
	}
	p.rows = append(p.rows, row)
	p.logf("  %-8s %-5s %-22s %10.1f %-9s %s", p.sys.Name, p.lat, phase, row.Rate, row.Unit, row.Summary)
	return nil
}

// cpuMinRun is the shortest run whose machine CPU is reported: a row
// that only reports what an earlier phase measured (the checkpoint's "in
// bucket" rows) runs in microseconds, and a tick is 10 ms.
const cpuMinRun = 500 * time.Millisecond

// timedCPU runs fn and sets the summary's CPUBusy from /proc/stat read
// around it, when the run lasted cpuMinRun or longer.
func timedCPU(ctx context.Context, rep int, fn phaseFunc) (workload.Summary, error) {
	start := time.Now()
	before, berr := workload.ReadCPUTimes()
	s, err := fn(ctx, rep)
	after, aerr := workload.ReadCPUTimes()
	if berr == nil && aerr == nil && time.Since(start) >= cpuMinRun {
		if b := before.BusyShare(after); b > 0 {
			s.CPUBusy = b
		}
	}
	return s, err
}

// addStats adds a session's counters to a running total (nil: none yet).
func addStats(total *workload.CacheStats, s workload.CacheStats) *workload.CacheStats {
	if total == nil {
		return &s
	}
	sum := total.Add(s)
	return &sum
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
		parts = append(parts, fmt.Sprintf("passthrough %d/%d opens, %d READs answered", s.PassthroughOpens, s.Opens, s.Reads))
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
