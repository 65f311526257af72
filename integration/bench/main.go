package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

func main() {
	workload.Main("strata-bench", parseFlags, func(ctx context.Context, cfg Config) error {
		if cfg.RedrawCharts != "" {
			names, err := redrawCharts(cfg.RedrawCharts)
			if err == nil {
				fmt.Printf("Charts written to %s (%s).\n", cfg.RedrawCharts, strings.Join(names, ", "))
			}
			return err
		}
		_, err := run(ctx, cfg, os.Stdout, os.Stderr)
		return err
	})
}

// Run is what one benchmark run produced.
type Run struct {
	Cfg     Config
	Env     *Env
	Results *Results
	Started time.Time
	Elapsed time.Duration
	Skipped map[string]string // system -> why it did not run
	// SkippedWorkloads says why a selected workload did not run.
	SkippedWorkloads map[string]string
	Versions         map[string]string
	Commands         map[string]string // system -> a mount command it used
	// Setup is the time to make, upload and serve the data; Spent is the
	// time each workload took, over every system and latency.
	Setup time.Duration
	Spent map[string]time.Duration
	Args  []string
	// LoadStart and LoadEnd are the load averages around the run.
	LoadStart, LoadEnd string
}

// run sets up, measures every selected workload on every available
// system, and writes the report to out and to cfg.OutDir. Progress goes to
// progress. On cancellation it still reports what was measured.
func run(ctx context.Context, cfg Config, out, progress io.Writer) (*Run, error) {
	r := &Run{Cfg: cfg, Results: &Results{}, Started: time.Now(), Skipped: map[string]string{},
		SkippedWorkloads: map[string]string{}, Versions: map[string]string{}, Commands: map[string]string{}, Args: os.Args[1:],
		Spent:     map[string]time.Duration{},
		LoadStart: workload.LoadAverage()}
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "[%6s] %s\n", time.Since(r.Started).Round(time.Second), fmt.Sprintf(format, args...))
	}
	var wls []Workload
	var notes []string
	for _, w := range allWorkloads() {
		if !contains(cfg.Workloads, w.Name()) {
			continue
		}
		if _, writes := w.(Writer); writes && cfg.Backend == "gcs" {
			logf("workload %s skipped: it checks the bucket with S3 requests (-backend s3 only)", w.Name())
			continue
		}
		if pr, ok := w.(Prerequisite); ok {
			note, err := pr.Prerequisites(ctx)
			if err != nil {
				r.SkippedWorkloads[w.Name()] = err.Error()
				logf("workload %s skipped: %v", w.Name(), err)
				continue
			}
			notes = append(notes, note)
		}
		wls = append(wls, w)
	}
	logf("strata-bench: scale %s, workloads %v, systems %v, latencies %v", cfg.Scale.Name, cfg.Workloads, cfg.Systems, cfg.Latencies)
	env, err := setup(ctx, cfg, wls, logf)
	r.Setup = time.Since(r.Started)
	if err != nil {
		return r, err
	}
	defer env.Close()
	env.HoldOffPageReporting()
	r.Env = env
	env.Notes = append(env.Notes, notes...)

	var systems []System
	for _, s := range allSystems(cfg) {
		if !contains(cfg.Systems, s.Name) {
			continue
		}
		if cfg.Backend == "gcs" && !s.GCS {
			r.Skipped[s.Name] = "an S3 client; not run with -backend gcs"
			logf("system %s skipped: %s", s.Name, r.Skipped[s.Name])
			continue
		}
		if s.Available != nil {
			if err := s.Available(ctx); err != nil {
				r.Skipped[s.Name] = err.Error()
				logf("system %s skipped: %v", s.Name, err)
				continue
			}
		}
		if s.Version != nil {
			r.Versions[s.Name] = s.Version(ctx)
		}
		systems = append(systems, s)
	}

	runErr := r.measureAll(ctx, env, systems, wls, logf)
	r.Elapsed = time.Since(r.Started)
	r.LoadEnd = workload.LoadAverage()
	if err := r.writeReport(out); err != nil {
		return r, errors.Join(runErr, err)
	}
	return r, runErr
}

// measureAll runs, at every latency and for every workload, each system in
// turn (local disk first): rows that are compared are measured close in
// time, which matters on a machine whose load drifts. Local disk, which
// does not use the network, is measured again in every latency block.
func (r *Run) measureAll(ctx context.Context, env *Env, systems []System, wls []Workload, logf func(string, ...any)) error {
	for i, lat := range env.Lats {
		for _, w := range wls {
			if !runsAt(w, i, len(env.Lats)) {
				continue
			}
			for _, s := range systems {
				if s.Runs != nil && !s.Runs(w.Name()) {
					if why := notRun(s, w.Name()); why != "" {
						r.Results.Add(Row{Workload: w.Name(), Phase: "(all)", Latency: lat.Name(), System: s.Name,
							Role: s.Role, Unit: w.Unit(), Err: why})
					}
					continue
				}
				if err := r.measure(ctx, env, w, s, lat, lat.Name(), logf); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// notRun is why a system left out of a workload does not run it ("": no
// row).
func notRun(s System, w string) string {
	if s.NotRun == nil {
		return ""
	}
	return s.NotRun(w)
}

// measure runs one workload on one system at one latency. A failure is
// recorded as a row and the run goes on; only cancellation stops it.
func (r *Run) measure(ctx context.Context, env *Env, w Workload, s System, lat Latency, latName string, logf func(string, ...any)) error {
	logf("%s on %s at %s", w.Name(), s.Name, latName)
	defer func(start time.Time) { r.Spent[w.Name()] += time.Since(start) }(time.Now())
	p := &Phases{env: env, wl: w, sys: s, lat: latName, logf: logf}
	wctx, cancel := context.WithTimeout(ctx, env.Cfg.Timeout)
	defer cancel()
	var err error
	if s.Client {
		g := &workload.GetClient{S3: workload.NewS3Client(env.s3(lat.Endpoint)), Bucket: env.Bucket(w.Prefix(env.Cfg.Scale))}
		err = w.RunClient(wctx, p, g)
	} else {
		tag := fmt.Sprintf("%s-%s-%s", latName, s.Name, w.Name())
		o := OpenOpts{Prefix: w.Prefix(env.Cfg.Scale), Latency: lat, Tag: tag}
		if wr, ok := w.(Writer); ok {
			o.Writable = wr.Writable()
		}
		var fs FS
		fs, err = s.Open(wctx, env, o)
		if err == nil {
			if c := fs.Command(); c != "" {
				r.Commands[s.Name] = c
			}
			err = w.RunFS(wctx, p, fs)
			cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if cerr := fs.Close(cctx); cerr != nil {
				logf("  cleanup %s: %v", s.Name, cerr)
			}
			ccancel()
		} else {
			err = fmt.Errorf("mount: %w", err)
		}
	}
	if _, writes := w.(Writer); writes {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if cerr := env.EmptyScratch(cctx, w.Prefix(env.Cfg.Scale)); cerr != nil {
			logf("  cleanup %s: %v", s.Name, cerr)
		}
		ccancel()
	}
	failedRow := false
	for _, row := range p.rows {
		failedRow = failedRow || row.Err != ""
	}
	r.Results.Add(p.rows...)
	if err != nil && !failedRow {
		r.Results.Add(Row{Workload: w.Name(), Phase: "(setup)", Latency: latName, System: s.Name, Role: s.Role,
			Unit: w.Unit(), Err: err.Error()})
		logf("  %s %s: %v", s.Name, w.Name(), err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bench: interrupted: %w", ctx.Err())
	}
	return nil
}
