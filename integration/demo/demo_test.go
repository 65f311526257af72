package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/integration/workload"
	"github.com/stratafs/strata/internal/testserver"
)

func TestMain(m *testing.M) {
	workload.MaybeRunWorker()
	os.Exit(m.Run())
}

func TestParseSize(t *testing.T) {
	tests := map[string]int64{
		"128KiB": 128 << 10, "64MiB": 64 << 20, "1GiB": 1 << 30, "1.5MiB": 3 << 19,
		"4096": 4096, "10MB": 10e6, "2K": 2048, "7B": 7,
	}
	for in, want := range tests {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "-2MiB", "MiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q): no error", bad)
		}
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 3000 || c.FileSize != 128<<10 || c.Backend != "s3" || c.Mounter != "strata" || !c.Verify {
		t.Errorf("defaults: %+v", c)
	}
	t.Setenv("STRATA_DEMO_BACKEND", "gcs")
	if c, err := parseFlags(nil); err != nil || c.Backend != "gcs" {
		t.Errorf("env backend: %v %v", c.Backend, err)
	}
	for _, bad := range [][]string{
		{"-backend", "azure"}, {"-mounter", "goofys"}, {"-mounter", "rclone", "-backend", "gcs"},
		{"-files", "0"}, {"-file-size", "big"}, {"extra"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestReport(t *testing.T) {
	s := func(ops int64, el time.Duration) workload.Summary {
		return workload.Summary{Ops: ops, Bytes: ops * 131072, Elapsed: el, P50: time.Millisecond, P99: 9 * time.Millisecond}
	}
	e1 := workload.CacheStats{}
	e1.Session.FetchedBytes = 400 * 131072
	e1.Session.MissBytes = 400 * 131072
	e1.Session.Opens = 400
	e2 := workload.CacheStats{}
	e2.Session.Opens, e2.Session.PassthroughOpens = 400, 400
	e2.Session.HitOps, e2.Session.HitBytes = 400, 400*131072 // a passthrough open is a hit of the file's size
	final := workload.CacheStats{SizeBytes: 400 * 131072, Objects: 400}
	r := &Result{Cfg: Config{Mounter: "strata", Procs: 4, Verify: true, Backend: "s3"}, Files: 400, Bytes: 400 * 131072,
		Server: "MinIO at http://x", Epoch1: s(400, 2*time.Second), Epoch2: s(400, 100*time.Millisecond),
		Local: s(400, 80*time.Millisecond), Verified: 400, Stats1: &e1, Stats2: &e2, Final: &final}
	var b strings.Builder
	writeReport(&b, r)
	out := b.String()
	for _, want := range []string{
		"| epoch 1 (cold, from MinIO) | 200 | 26.2 | 1.00ms | 9.00ms | 2.00s |",
		"| epoch 2 (warm, from the cache) | 4000 |",
		"| local disk (source directory) | 5000 |",
		"epoch 2 = 0.80× local disk and 20.0× epoch 1",
		"epoch 1 0.0% of bytes served from the cache (50MiB fetched); hit ratio 0.0% of 50MiB",
		"epoch 2 100.0% of bytes served from the cache (0B fetched); hit ratio 100.0% of 50MiB, 400 of 400 opens by passthrough",
		"holds 50MiB in 400 objects",
		"sha256: 400 of 400 files match",
		"page cache dropped before each pass",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// demoSmoke runs the demo at a tiny size and checks the report.
func demoSmoke(t *testing.T, args ...string) *Result {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a server and mounts")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testserver.SkipOrFail(t, "no /dev/fuse: %v", err)
	}
	cfg, err := parseFlags(append([]string{"-files", "60", "-dirs", "3", "-file-size", "32KiB",
		"-large", "1", "-large-size", "3MiB", "-procs", "2", "-workdir", t.TempDir()}, args...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out strings.Builder
	res, err := run(ctx, cfg, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch1.Ops != 61 || res.Epoch2.Ops != 61 || res.Local.Ops != 61 || res.Verified != 61 {
		t.Errorf("passes: %+v %+v %+v verified %d", res.Epoch1, res.Epoch2, res.Local, res.Verified)
	}
	if !strings.Contains(out.String(), "cleaned up") || workload.IsMounted(cfg.WorkDir+"/mnt") {
		t.Error("not cleaned up")
	}
	return res
}

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := workload.Tool(name); err != nil {
		testserver.SkipOrFail(t, "%v; run `make tools` to run this test", err)
	}
}

func needStrata(t *testing.T) {
	t.Helper()
	if err := (&workload.Strata{}).Available(context.Background()); err != nil {
		testserver.SkipOrFail(t, "strata mount unavailable, demo not smoke-tested on strata (run `make build`): %v", err)
	}
}

func TestDemoStrataS3(t *testing.T) {
	needTool(t, "minio")
	needStrata(t)
	res := demoSmoke(t)
	if res.StatsErr != nil || res.Stats2 == nil || res.Final == nil {
		t.Errorf("cache stats: %v", res.StatsErr)
	} else if res.Stats2.Session.FetchedBytes != 0 {
		t.Errorf("epoch 2 fetched %d bytes", res.Stats2.Session.FetchedBytes)
	}
}

func TestDemoStrataGCS(t *testing.T) {
	needTool(t, "fake-gcs-server")
	needStrata(t)
	demoSmoke(t, "-backend", "gcs")
}

// The demo flow itself is exercised with a peer even without strata.
func TestDemoPeer(t *testing.T) {
	needTool(t, "minio")
	if err := (&workload.Rclone{}).Available(context.Background()); err != nil {
		testserver.SkipOrFail(t, "rclone not installed (`make bench-peers` installs it): %v", err)
	}
	demoSmoke(t, "-mounter", "rclone")
}
