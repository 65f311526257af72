package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// Scale sizes every workload.
type Scale struct {
	Name        string
	ImageFolder workload.ImageFolderSpec
	ImageProcs  int
	WebDataset  workload.WebDatasetSpec
	ShardProcs  int
	BigFile     workload.BigFileSpec
	RandProcs   int
	// RandColdOps and RandWarmOps are preads per process (cold reads are
	// slow at 20 ms: fewer of them).
	RandColdOps, RandWarmOps int
	Listing                  workload.ListingSpec
	ListingDeep              workload.ListingSpec
	// CheckpointSize is the torch.save state dict's size, and the Hugging
	// Face checkpoint's (all its files).
	CheckpointSize int64
	// JPEGFolder is the PyTorch DataLoader workload's ImageFolder of JPEGs.
	JPEGFolder workload.JPEGFolderSpec
	// Samples is the unet3d AU workload's records (MLPerf's unet3d sizes
	// at the full scale).
	Samples workload.SamplesSpec
	// PhaseCap stops any single phase (rates are then over what was done).
	PhaseCap time.Duration
	// AUMaxAccel bounds the accelerator-utilisation search (0: auMaxAccel).
	AUMaxAccel int
}

const (
	mib = int64(1) << 20
	kib = int64(1) << 10
)

// scales are the predefined sizes: full is issue #3's benchmark.
var scales = map[string]Scale{
	"full": {
		Name:        "full",
		ImageFolder: workload.ImageFolderSpec{Prefix: "imagefolder", Files: 4000, Dirs: 40, Size: 128 * kib},
		ImageProcs:  8,
		WebDataset:  workload.WebDatasetSpec{Prefix: "webdataset", Shards: 4, ShardSize: 256 * mib, SampleSize: 128 * kib},
		ShardProcs:  4,
		BigFile:     workload.BigFileSpec{Prefix: "random", Count: 1, Size: 1024 * mib},
		RandProcs:   4, RandColdOps: 500, RandWarmOps: 5000,
		Listing:        workload.ListingSpec{Prefix: "listing", Keys: 100_000, Dirs: 10, SubDirs: 10, Size: 64},
		ListingDeep:    workload.ListingSpec{Prefix: "listing-deep", Keys: 20_000, Dirs: 20, SubDirs: 100, Size: 64},
		CheckpointSize: 2048 * mib,
		JPEGFolder:     workload.JPEGFolderSpec{Prefix: "jpegfolder", Files: 2000, Dirs: 20, MinSize: 100 * kib, MaxSize: 150 * kib},
		Samples:        workload.SamplesSpec{Prefix: "unet3d", Files: 12, Size: 146_600_628, Jitter: 0.8},
		// A minute bounds only the slowest peers' phases (s3fs's ls -lR
		// of 100,000 keys, its cold ImageFolder epoch at 20 ms): their rate
		// over the first minute, noted "stopped at the cap".
		PhaseCap: time.Minute,
	},
	"quick": {
		Name:        "quick",
		ImageFolder: workload.ImageFolderSpec{Prefix: "imagefolder", Files: 800, Dirs: 8, Size: 128 * kib},
		ImageProcs:  8,
		WebDataset:  workload.WebDatasetSpec{Prefix: "webdataset", Shards: 4, ShardSize: 32 * mib, SampleSize: 128 * kib},
		ShardProcs:  4,
		BigFile:     workload.BigFileSpec{Prefix: "random", Count: 1, Size: 128 * mib},
		RandProcs:   4, RandColdOps: 100, RandWarmOps: 1000,
		Listing:        workload.ListingSpec{Prefix: "listing", Keys: 5000, Dirs: 5, SubDirs: 5, Size: 64},
		ListingDeep:    workload.ListingSpec{Prefix: "listing-deep", Keys: 2000, Dirs: 10, SubDirs: 20, Size: 64},
		CheckpointSize: 128 * mib,
		JPEGFolder:     workload.JPEGFolderSpec{Prefix: "jpegfolder", Files: 256, Dirs: 8, MinSize: 100 * kib, MaxSize: 150 * kib},
		Samples:        workload.SamplesSpec{Prefix: "unet3d", Files: 8, Size: 32 * mib, Jitter: 0.8},
		// The quick scale checks that every workload runs on every system
		// in under 10 minutes: 256 JPEGs (four batches), the slow peers'
		// phases stop at 10 s, and the AU search at 4 accelerators.
		PhaseCap:   10 * time.Second,
		AUMaxAccel: 4,
	},
	"tiny": {
		Name:        "tiny",
		ImageFolder: workload.ImageFolderSpec{Prefix: "imagefolder", Files: 48, Dirs: 4, Size: 16 * kib},
		ImageProcs:  4,
		WebDataset:  workload.WebDatasetSpec{Prefix: "webdataset", Shards: 2, ShardSize: 2 * mib, SampleSize: 64 * kib},
		ShardProcs:  2,
		BigFile:     workload.BigFileSpec{Prefix: "random", Count: 1, Size: 4 * mib},
		RandProcs:   2, RandColdOps: 20, RandWarmOps: 50,
		Listing:        workload.ListingSpec{Prefix: "listing", Keys: 120, Dirs: 2, SubDirs: 3, Size: 16},
		ListingDeep:    workload.ListingSpec{Prefix: "listing-deep", Keys: 120, Dirs: 3, SubDirs: 10, Size: 16},
		CheckpointSize: 16 * mib,
		JPEGFolder:     workload.JPEGFolderSpec{Prefix: "jpegfolder", Files: 64, Dirs: 4, MinSize: 100 * kib, MaxSize: 150 * kib},
		Samples:        workload.SamplesSpec{Prefix: "unet3d", Files: 8, Size: 2 * mib, Jitter: 0.8},
		PhaseCap:       30 * time.Second,
	},
}

// Config is everything a run needs, from flags and environment.
type Config struct {
	Scale     Scale
	Workloads []string
	Systems   []string
	Latencies []time.Duration
	WorkDir   string
	OutDir    string
	// StrataFlags are added to every strata mount.
	StrataFlags []string
	Seed        uint64
	// Timeout bounds one workload on one system (all its phases).
	Timeout time.Duration
	Verify  bool
	Chart   bool
	// Repeat runs warm phases (and every phase of cache-less systems)
	// this many times and reports the median.
	Repeat int
	// RedrawCharts, if set, is a finished run's output directory whose
	// charts are drawn again from its results.json; nothing is measured.
	RedrawCharts string
	// RcloneFlags are added to every rclone mount.
	RcloneFlags []string
	// Backend is where the data lives: "s3" (MinIO) or "gcs"
	// (fake-gcs-server; Strata only, the peers and the GET client are S3
	// clients here).
	Backend string
	// PageReporting is "off" (hold the VM's free page reporting off for
	// the run, workload.HoldOffPageReporting) or "keep".
	PageReporting string
}

// parseFlags reads the command line; environment variables give the
// defaults (STRATA_BENCH_SCALE, _WORKLOADS, _SYSTEMS, _LATENCIES, _DIR).
func parseFlags(args []string) (Config, error) {
	fs := flag.NewFlagSet("strata-bench", flag.ContinueOnError)
	scale := fs.String("scale", envOr("STRATA_BENCH_SCALE", "full"), "data size: full (issue #3), quick or tiny")
	wls := fs.String("workloads", envOr("STRATA_BENCH_WORKLOADS", "all"), "comma-separated workloads of "+strings.Join(workloadNames(), ",")+
		", or sets: training (make bench: "+strings.Join(workloadSets["training"], ",")+"), paths (make bench-paths: "+
		strings.Join(workloadSets["paths"], ",")+"), all")
	sys := fs.String("systems", envOr("STRATA_BENCH_SYSTEMS", strings.Join(systemNames(), ",")), "comma-separated subset of "+strings.Join(systemNames(), ","))
	lats := fs.String("latencies", envOr("STRATA_BENCH_LATENCIES", "0ms,20ms"), "injected latencies per request (toxiproxy; -scale quick: 20ms unless given)")
	work := fs.String("workdir", envOr("STRATA_BENCH_DIR", filepath.Join(os.TempDir(), "strata-bench.work")), "data, MinIO drive, caches and logs (data is reused across runs)")
	out := fs.String("out", "bench-results", "directory for results.md, results.json and the charts (chart-FAMILY.png)")
	strataFlags := fs.String("strata-flags", "", "flags added to every strata mount (space-separated; default none: Strata's rows are its defaults)")
	seed := fs.Uint64("seed", 1, "dataset and shuffle seed")
	timeout := fs.Duration("timeout", 0, "limit per workload per system (default: 20m full, 5m otherwise)")
	verify := fs.Bool("verify", false, "check the sha256 of every file read in the ImageFolder and WebDataset phases (costs CPU)")
	chart := fs.Bool("chart", true, "write a chart per workload family (chart-FAMILY.png: each system relative to local disk)")
	repeat := fs.Int("repeat", 3, "runs of each warm phase (and of every phase on local disk and the GET client); the median is reported (-scale quick: 1 unless given)")
	backend := fs.String("backend", envOr("STRATA_BENCH_BACKEND", "s3"), "s3 (MinIO) or gcs (fake-gcs-server: local disk and strata rows only)")
	redraw := fs.String("redraw-charts", "", "draw the charts of a finished run's output directory again from its results.json, and exit")
	pageReporting := fs.String("page-reporting", "off", "the VM's free page reporting to its host during the run: off (held off, restored after: memory the host took back faults when used again, which made the checkpoint rows 1.2-2.8x slower and swing with what the run before had freed) or keep")
	rcloneFlags := fs.String("rclone-flags", "--use-server-modtime", "flags added to every rclone mount (space-separated); the default spares rclone a HEAD per file for the modification time")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *scale == "quick" {
		// The quick scale is a check that every workload runs, in a few
		// minutes: one latency block, one run per phase. Its figures are
		// not for publishing.
		if !set["latencies"] && os.Getenv("STRATA_BENCH_LATENCIES") == "" {
			*lats = "20ms"
		}
		if !set["repeat"] {
			*repeat = 1
		}
	}
	c := Config{WorkDir: *work, OutDir: *out, Seed: *seed, Verify: *verify, Chart: *chart,
		StrataFlags: strings.Fields(*strataFlags), RcloneFlags: strings.Fields(*rcloneFlags), Repeat: *repeat, RedrawCharts: *redraw}
	if c.Repeat < 1 {
		return c, fmt.Errorf("-repeat must be at least 1")
	}
	if c.PageReporting = *pageReporting; c.PageReporting != "off" && c.PageReporting != "keep" {
		return c, fmt.Errorf("-page-reporting must be off or keep, not %q", c.PageReporting)
	}
	if c.Backend = *backend; c.Backend != "s3" && c.Backend != "gcs" {
		return c, fmt.Errorf("-backend must be s3 or gcs, not %q", c.Backend)
	}
	var ok bool
	if c.Scale, ok = scales[*scale]; !ok {
		return c, fmt.Errorf("unknown scale %q (full, quick, tiny)", *scale)
	}
	var err error
	if c.Workloads, err = subset(expandSets(*wls), workloadNames()); err != nil {
		return c, fmt.Errorf("-workloads: %w", err)
	}
	if c.Systems, err = subset(*sys, systemNames()); err != nil {
		return c, fmt.Errorf("-systems: %w", err)
	}
	if c.Latencies, err = parseLatencies(*lats); err != nil {
		return c, fmt.Errorf("-latencies: %w", err)
	}
	c.Timeout = *timeout
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
		if c.Scale.Name == "full" {
			c.Timeout = 20 * time.Minute
		}
	}
	return c, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// subset splits a comma list and checks every name is known; the result
// keeps the order of known.
func subset(list string, known []string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
			delete(want, k)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown name %q (known: %s)", n, strings.Join(known, ","))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty selection")
	}
	return out, nil
}

// parseLatencies reads "0ms,20ms" (a bare number means milliseconds).
func parseLatencies(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, time.Duration(n)*time.Millisecond)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad latency %q", f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no latency given")
	}
	return out, nil
}

// dataset is the whole benchmark tree for a scale.
func (c Config) dataset() workload.Dataset {
	s := c.Scale
	return workload.Dataset{Seed: c.Seed, ImageFolder: &s.ImageFolder, WebDataset: &s.WebDataset,
		BigFiles: &s.BigFile, Listing: &s.Listing, ListingDeep: &s.ListingDeep, JPEGFolder: &s.JPEGFolder, Samples: &s.Samples}
}
