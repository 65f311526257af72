package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stratafs/strata/integration/workload"
	"github.com/stratafs/strata/internal/testserver"
)

// TestSmokeDataLoader runs the PyTorch DataLoader workload at the tiny
// scale (64 JPEGs, one run per phase) on local disk and strata: real
// torchvision ImageFolder epochs over the mount, cold, warm and after a
// restart, with the rows, ratios and report the full benchmark makes.
func TestSmokeDataLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MinIO and toxiproxy, mounts and runs PyTorch")
	}
	if err := (&workload.Strata{}).Available(context.Background()); err != nil {
		testserver.SkipOrFail(t, "strata mount unavailable (run `make build`): %v", err)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testserver.SkipOrFail(t, "no /dev/fuse: %v", err)
	}
	// smoke skips (fails under STRATA_E2E=1) when PyTorch is missing.
	r, out := smoke(t, "local,strata", "0ms", "-workloads", "dataloader", "-repeat", "1")
	spec := scales["tiny"].JPEGFolder
	phases := map[string]int{}
	for _, row := range r.Results.Rows {
		if row.Err != "" {
			t.Errorf("%s/%s/%s failed: %s", row.System, row.Phase, row.Latency, row.Err)
			continue
		}
		phases[row.System]++
		if row.Workload != "dataloader" || row.Unit != "images/s" || row.Rate <= 0 ||
			row.Summary.Ops != int64(spec.Files) || row.Summary.Bytes <= int64(spec.Files)*spec.MinSize {
			t.Errorf("row %+v: want every one of %d images of at least %d bytes", row, spec.Files, spec.MinSize)
		}
		if row.System == "strata" && !strings.Contains(row.Note, "from cache") {
			t.Errorf("strata %s: no cache counters in %q", row.Phase, row.Note)
		}
	}
	if phases["local"] != 3 || phases["strata"] != 3 {
		t.Errorf("phases per system %v, want 3 (cold, warm, restarted)\n%s", phases, out)
	}
	for _, s := range []string{"### PyTorch DataLoader", "DataLoader runs", "torch"} {
		if !strings.Contains(out, s) {
			t.Errorf("report lacks %q:\n%s", s, out)
		}
	}
	// Strata's rows are compared with local disk.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "**strata**") && !strings.Contains(line, "×") {
			t.Errorf("no ratio to local disk in %q", line)
		}
	}
}
