package main

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// fakeFS counts remounts; each mount is a new session whose counters are
// what the runs on it fetched.
type fakeFS struct {
	localFS
	fresh, restarts int
	session         workload.CacheStats
}

func (f *fakeFS) Fresh(context.Context) error {
	f.fresh++
	f.session = workload.CacheStats{}
	return nil
}
func (f *fakeFS) Empty(context.Context) error { f.session = workload.CacheStats{}; return nil }
func (f *fakeFS) Restart(context.Context) error {
	f.restarts++
	f.session = workload.CacheStats{}
	return nil
}
func (f *fakeFS) Stats(context.Context, time.Time) (*workload.CacheStats, error) {
	s := f.session
	return &s, nil
}

// TestRemountedPhase: a remounted phase runs Repeat times on a cached
// system too, resets before the runs it is asked to, and adds up the
// counters of every run's session (each starts at zero on its mount).
func TestRemountedPhase(t *testing.T) {
	env := &Env{Cfg: Config{Repeat: 3, Scale: scales["tiny"]}, DropErr: errors.New("not in unit tests")}
	p := &Phases{env: env, wl: dataLoader{}, sys: System{Name: "strata", Role: RoleSubject}, lat: "0ms",
		logf: func(string, ...any) {}}
	fs := &fakeFS{}
	var reps []int
	run := func(_ context.Context, rep int) (workload.Summary, error) {
		reps = append(reps, rep)
		fs.session.Session.FetchedBytes += 1 << 20 // each run fetches 1 MiB
		return workload.Summary{Ops: 64, Bytes: 1 << 20, Elapsed: time.Duration(rep+1) * time.Second}, nil
	}
	fresh := func(ctx context.Context, rep int) error {
		if rep == 0 {
			return nil
		}
		return fs.Fresh(ctx)
	}
	if err := p.Remounted(context.Background(), phaseCold, fs, perSecond, fresh, run); err != nil {
		t.Fatal(err)
	}
	if len(reps) != 3 || fs.fresh != 2 {
		t.Fatalf("runs %v, %d fresh mounts; want 3 runs and 2", reps, fs.fresh)
	}
	row := p.rows[0]
	// Rates 64, 32 and 21.3 images/s: the median is 32.
	if row.Rate != 32 || !strings.Contains(row.Note, "median of 3 (21.3–64.0)") {
		t.Errorf("row %v: %q", row.Rate, row.Note)
	}
	if !reflect.DeepEqual(row.Runs, []float64{64.0 / 3, 32, 64}) {
		t.Errorf("runs %v", row.Runs)
	}
	// Three sessions of 1 MiB each: all fetched, none from cache.
	if !strings.Contains(row.Note, "0% from cache, fetched 3MiB") {
		t.Errorf("counters over the sessions: %q", row.Note)
	}

	restart := func(ctx context.Context, _ int) error { return fs.Restart(ctx) }
	boom := errors.New("boom")
	failing := func(ctx context.Context, rep int) (workload.Summary, error) {
		if rep == 1 {
			return workload.Summary{}, boom
		}
		return run(ctx, rep)
	}
	if err := p.Remounted(context.Background(), phaseRestart, fs, perSecond, restart, failing); !errors.Is(err, boom) {
		t.Fatalf("failing run: %v", err)
	}
	if fs.restarts != 2 || len(p.rows) != 2 || !strings.Contains(p.rows[1].Err, "boom") {
		t.Errorf("%d restarts, rows %+v", fs.restarts, p.rows)
	}
}

// TestWorkloadSets: every workload is in exactly one named set, so `make
// bench` and `make bench-paths` together run what `make bench-all` runs,
// and set names mix with single workloads.
func TestWorkloadSets(t *testing.T) {
	seen := map[string]string{}
	for set, names := range workloadSets {
		for _, n := range names {
			if other, ok := seen[n]; ok {
				t.Errorf("%s is in %s and %s", n, other, set)
			}
			seen[n] = set
		}
	}
	for _, n := range workloadNames() {
		if seen[n] == "" {
			t.Errorf("workload %s is in no set", n)
		}
		delete(seen, n)
	}
	for n := range seen {
		t.Errorf("set member %s is no workload", n)
	}
	cfg, err := parseFlags([]string{"-workloads", "paths,checkpoint"})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(workloadSets["paths"]), "checkpoint")
	if !reflect.DeepEqual(cfg.Workloads, want) {
		t.Errorf("paths,checkpoint selects %v, want %v", cfg.Workloads, want)
	}
	if cfg, err = parseFlags([]string{"-workloads", "all"}); err != nil || !reflect.DeepEqual(cfg.Workloads, workloadNames()) {
		t.Errorf("all selects %v (%v)", cfg.Workloads, err)
	}
	if _, err := parseFlags([]string{"-workloads", "trainig"}); err == nil {
		t.Error("a misspelt set was accepted")
	}
}
