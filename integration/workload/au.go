package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// AUOpts configures python/au.py, MLPerf Storage's accelerator
// utilisation replay: each emulated accelerator has a DataLoader of
// Workers over its share of the files under Root and sleeps Compute per
// batch of BatchSize.
type AUOpts struct {
	Root               string
	Workers, BatchSize int
	Compute            time.Duration
}

// AUResult is what the program reports about one run with Accelerators
// emulated accelerators.
type AUResult struct {
	Accelerators int     `json:"accelerators"`
	Samples      int     `json:"samples"`
	Bytes        int64   `json:"bytes"`
	Batches      int     `json:"batches"`
	ComputeS     float64 `json:"compute_s"`
	WallS        float64 `json:"wall_s"`
	AU           float64 `json:"au"`
	MinAU        float64 `json:"min_au"`
	FirstBatchS  float64 `json:"first_batch_s"`
	Seconds      float64 `json:"seconds"`
	DatasetFiles int     `json:"dataset_files"`
	Torch        string  `json:"torch"`
}

// AUReplay is a running python/au.py --serve: one Python process that
// runs a replay per request. Between runs it holds nothing open on Root.
type AUReplay struct {
	py  *pyProc
	out *bufio.Reader
}

// StartAU starts the program and waits until it is ready.
func StartAU(ctx context.Context, o AUOpts) (*AUReplay, error) {
	if o.Workers <= 0 || o.BatchSize <= 0 || o.Compute <= 0 {
		return nil, fmt.Errorf("workload: au: workers, batch size and compute time must be > 0")
	}
	py, err := startPython(ctx, auScript, "--serve", "--root", o.Root, "--workers", strconv.Itoa(o.Workers),
		"--batch-size", strconv.Itoa(o.BatchSize), "--compute-ms", strconv.FormatFloat(o.Compute.Seconds()*1000, 'f', -1, 64))
	if err != nil {
		return nil, err
	}
	a := &AUReplay{py: py, out: bufio.NewReader(py.stdout)}
	var ready struct {
		Ready bool `json:"ready"`
	}
	if err := readJSONLine(ctx, a.py, a.out, "au", &ready); err != nil {
		_ = a.Close()
		return nil, err
	}
	return a, nil
}

// Run emulates n accelerators, each reading its share of the files once.
// Not for concurrent use.
func (a *AUReplay) Run(ctx context.Context, n int, seed uint64) (AUResult, error) {
	req, err := json.Marshal(map[string]any{"accelerators": n, "seed": seed})
	if err != nil {
		return AUResult{}, err
	}
	if _, err := a.py.stdin.Write(append(req, '\n')); err != nil {
		return AUResult{}, a.py.failure(fmt.Errorf("workload: au: %w", err))
	}
	var r AUResult
	if err := readJSONLine(ctx, a.py, a.out, "au", &r); err != nil {
		return r, err
	}
	if r.Samples != r.DatasetFiles {
		return r, fmt.Errorf("workload: au read %d of %d files", r.Samples, r.DatasetFiles)
	}
	return r, nil
}

// Close ends the program.
func (a *AUReplay) Close() error { return a.py.close() }

const auScript = "au.py"
