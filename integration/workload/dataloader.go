package workload

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// DataLoaderOpts is one epoch of python/dataloader.py: torchvision's
// ImageFolder over Root and a DataLoader with the standard ImageNet
// transforms.
type DataLoaderOpts struct {
	Root string
	// Workers is DataLoader's num_workers (default 8), BatchSize its
	// batch_size (default 64).
	Workers, BatchSize int
	// Transform is "train" (RandomResizedCrop(224), flip; the default) or
	// "eval" (Resize(256), CenterCrop(224)).
	Transform string
	// Seed seeds the shuffle and the augmentation (a new one per epoch).
	Seed uint64
	// MaxDuration stops the epoch early (0: none); the summary is then
	// Truncated.
	MaxDuration time.Duration
}

// DataLoaderResult is what the program reports about its epoch.
type DataLoaderResult struct {
	Images        int       `json:"images"`
	Batches       int       `json:"batches"`
	Classes       int       `json:"classes"`
	DatasetImages int       `json:"dataset_images"`
	Seconds       float64   `json:"seconds"`
	ScanSeconds   float64   `json:"scan_seconds"`
	BatchWaits    []float64 `json:"batch_waits_s"`
	Truncated     bool      `json:"truncated"`
	Torch         string    `json:"torch"`
	Torchvision   string    `json:"torchvision"`
}

// Summary turns the epoch into a Summary: Ops are images, Bytes their
// share of datasetBytes, latencies are the loop's waits per batch.
func (r DataLoaderResult) Summary(datasetBytes int64, workers int) Summary {
	s := Summary{Ops: int64(r.Images), Elapsed: time.Duration(r.Seconds * float64(time.Second)),
		Procs: workers, Truncated: r.Truncated}
	if r.DatasetImages > 0 {
		s.Bytes = datasetBytes * int64(r.Images) / int64(r.DatasetImages)
	}
	waits := make([]time.Duration, len(r.BatchWaits))
	for i, w := range r.BatchWaits {
		waits[i] = time.Duration(w * float64(time.Second))
	}
	slices.Sort(waits)
	s.P50, s.P99 = Percentile(waits, 50), Percentile(waits, 99)
	if len(waits) > 0 {
		s.Max = waits[len(waits)-1]
	}
	s.Note = fmt.Sprintf("first batch after %s, ImageFolder scan %s", FormatLatency(firstWait(r.BatchWaits)),
		FormatLatency(time.Duration(r.ScanSeconds*float64(time.Second))))
	return s
}

func firstWait(w []float64) time.Duration {
	if len(w) == 0 {
		return 0
	}
	return time.Duration(w[0] * float64(time.Second))
}

// RunDataLoader runs one epoch in its own Python process (Python()) and
// returns its report. An epoch that ends early without MaxDuration, or
// with a batch of the wrong shape, is an error.
func RunDataLoader(ctx context.Context, o DataLoaderOpts) (DataLoaderResult, error) {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
	if o.Transform == "" {
		o.Transform = "train"
	}
	args := []string{"--root", o.Root, "--workers", strconv.Itoa(o.Workers), "--batch-size", strconv.Itoa(o.BatchSize),
		"--transform", o.Transform, "--seed", strconv.FormatUint(o.Seed, 10)}
	if o.MaxDuration > 0 {
		args = append(args, "--max-seconds", strconv.FormatFloat(o.MaxDuration.Seconds(), 'f', 3, 64))
	}
	var r DataLoaderResult
	if err := runPython(ctx, dataLoaderScript, &r, args...); err != nil {
		return r, err
	}
	if !r.Truncated && r.Images != r.DatasetImages {
		return r, fmt.Errorf("workload: dataloader read %d of %d images", r.Images, r.DatasetImages)
	}
	return r, nil
}

const dataLoaderScript = "dataloader.py"
