package workload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// needTorch skips (or, under STRATA_E2E=1, fails) when err says Python
// lacks PyTorch, torchvision or Pillow, and fails the test on any other
// error. (Checking up front would cost another import of torch.)
func needTorch(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrNoTorch) {
		testserver.SkipOrFail(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestJPEGFolderAndDataLoader generates a small JPEG ImageFolder twice
// (same seed, same bytes; sizes in range; classes as directories) and runs
// two epochs of the real DataLoader over it in one Python process.
func TestJPEGFolderAndDataLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python with PyTorch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := &JPEGFolderSpec{Prefix: "jpg", Files: 12, Dirs: 3, MinSize: 100 << 10, MaxSize: 150 << 10}
	d := Dataset{Seed: 5, JPEGFolder: spec}
	dir := t.TempDir()
	m, err := Generate(ctx, dir, d, nil)
	needTorch(t, err)
	again, err := Generate(ctx, t.TempDir(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, again) {
		t.Error("two generations with one seed differ")
	}
	if len(m.Files) != 12 || len(m.Under("jpg")) != 12 {
		t.Fatalf("%d files", len(m.Files))
	}
	for _, f := range m.Files {
		if f.Size < spec.MinSize || f.Size > spec.MaxSize || !strings.HasSuffix(f.Path, ".jpg") {
			t.Errorf("%s: %d bytes", f.Path, f.Size)
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil || len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
			t.Errorf("%s is not a JPEG: %v", f.Path, err)
		}
	}

	dl, err := StartDataLoader(ctx, DataLoaderOpts{Root: filepath.Join(dir, "jpg"), Workers: 2, BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	for seed := uint64(1); seed <= 2; seed++ {
		r, err := dl.Epoch(ctx, seed)
		if err != nil {
			t.Fatal(err)
		}
		// 12 images in batches of 5: 5, 5, 2.
		if r.Images != 12 || r.DatasetImages != 12 || r.Classes != 3 || r.Batches != 3 || len(r.BatchWaits) != 3 ||
			r.Truncated || r.Seconds <= 0 || r.Torch == "" {
			t.Errorf("epoch %d: %+v", seed, r)
		}
		s := r.Summary(TotalSize(m.Files), 2)
		if s.Ops != 12 || s.Bytes != TotalSize(m.Files) || s.P99 < s.P50 || s.Max < s.P99 {
			t.Errorf("summary %+v", s)
		}
	}
	if err := dl.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestDataLoaderFailure: an epoch over a directory without class folders
// fails with Python's reason, and the process is gone.
func TestDataLoaderFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python with PyTorch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dl, err := StartDataLoader(ctx, DataLoaderOpts{Root: t.TempDir(), Workers: 1})
	needTorch(t, err)
	defer dl.Close()
	_, err = dl.Epoch(ctx, 1)
	if err == nil || !strings.Contains(err.Error(), "class folder") {
		t.Fatalf("epoch over an empty directory: %v", err)
	}
	if errors.Is(err, ErrNoTorch) {
		t.Errorf("reported as a missing module: %v", err)
	}
}
