package workload

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAUReplay runs the replay over a small tree with 1 and 2 emulated
// accelerators: every file is read once per run, AU is compute over wall
// time and within (0, 1]; and a run with more accelerators than files
// fails with Python's reason.
func TestAUReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python with PyTorch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := Dataset{Seed: 4, ImageFolder: &ImageFolderSpec{Prefix: "img", Files: 24, Dirs: 2, Size: 20_000}}
	dir := t.TempDir()
	m, err := Generate(ctx, dir, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	au, err := StartAU(ctx, AUOpts{Root: filepath.Join(dir, "img"), Workers: 1, BatchSize: 4, Compute: 10 * time.Millisecond})
	needTorch(t, err)
	defer au.Close()
	for n := 1; n <= 2; n++ {
		r, err := au.Run(ctx, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		// 24 files in batches of 4: 6 batches in all, also when split in
		// two shares of 12.
		if r.Accelerators != n || r.Samples != 24 || r.Bytes != TotalSize(m.Files) || r.Batches != 6 ||
			r.ComputeS < 0.059 || r.ComputeS > 0.061 || r.AU <= 0 || r.AU > 1.0001 || r.MinAU > r.AU+1e-9 ||
			r.Torch == "" {
			t.Errorf("%d accelerators: %+v", n, r)
		}
	}
	if _, err := au.Run(ctx, 25, 1); err == nil || !strings.Contains(err.Error(), "fewer than 25 accelerators") {
		t.Errorf("25 accelerators over 24 files: %v", err)
	}
}
