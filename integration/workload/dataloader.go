package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// DataLoaderOpts configures python/dataloader.py: each epoch builds
// torchvision's ImageFolder over Root and iterates a DataLoader with the
// standard ImageNet transforms.
type DataLoaderOpts struct {
	Root string
	// Workers is DataLoader's num_workers (default 8), BatchSize its
	// batch_size (default 64).
	Workers, BatchSize int
	// Transform is "train" (RandomResizedCrop(224), flip; the default) or
	// "eval" (Resize(256), CenterCrop(224)).
	Transform string
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

// DataLoader is a running python/dataloader.py --serve: one Python
// process, like a training job, that runs an epoch on request. Between
// epochs it holds nothing open on Root (its workers have exited), so the
// filesystem can be remounted.
type DataLoader struct {
	o   DataLoaderOpts
	py  *pyProc
	out *bufio.Reader
}

// StartDataLoader starts the program (importing torch takes seconds) and
// waits until it is ready. The process lives until Close or until ctx
// ends.
func StartDataLoader(ctx context.Context, o DataLoaderOpts) (*DataLoader, error) {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
	if o.Transform == "" {
		o.Transform = "train"
	}
	py, err := startPython(ctx, dataLoaderScript, "--serve", "--root", o.Root, "--workers", strconv.Itoa(o.Workers),
		"--batch-size", strconv.Itoa(o.BatchSize), "--transform", o.Transform)
	if err != nil {
		return nil, err
	}
	d := &DataLoader{o: o, py: py, out: bufio.NewReader(py.stdout)}
	var ready struct {
		Ready bool `json:"ready"`
	}
	if err := d.read(ctx, &ready); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// Epoch runs one epoch with its own shuffle and augmentation seed. An
// epoch that ends early without MaxDuration is an error. A DataLoader runs
// one epoch at a time (not for concurrent use).
func (d *DataLoader) Epoch(ctx context.Context, seed uint64) (DataLoaderResult, error) {
	req, err := json.Marshal(map[string]any{"seed": seed, "max_seconds": d.o.MaxDuration.Seconds()})
	if err != nil {
		return DataLoaderResult{}, err
	}
	if _, err := d.py.stdin.Write(append(req, '\n')); err != nil {
		return DataLoaderResult{}, d.py.failure(fmt.Errorf("workload: dataloader: %w", err))
	}
	var r DataLoaderResult
	if err := d.read(ctx, &r); err != nil {
		return r, err
	}
	if !r.Truncated && r.Images != r.DatasetImages {
		return r, fmt.Errorf("workload: dataloader read %d of %d images", r.Images, r.DatasetImages)
	}
	return r, nil
}

// read decodes the program's next stdout line into v; ctx's end kills
// the program.
func (d *DataLoader) read(ctx context.Context, v any) error {
	return readJSONLine(ctx, d.py, d.out, "dataloader", v)
}

// readJSONLine decodes a served program's next stdout line into v; ctx's
// end kills the program. what names the program in errors.
func readJSONLine(ctx context.Context, py *pyProc, out *bufio.Reader, what string, v any) error {
	type line struct {
		b   []byte
		err error
	}
	ch := make(chan line, 1)
	go func() {
		b, err := out.ReadBytes('\n')
		ch <- line{b, err}
	}()
	var l line
	select {
	case l = <-ch:
	case <-ctx.Done():
		py.kill()
		<-ch
		return fmt.Errorf("workload: %s: %w", what, ctx.Err())
	}
	if l.err != nil {
		return py.failure(fmt.Errorf("workload: %s: %w", what, l.err))
	}
	if err := json.Unmarshal(l.b, v); err != nil {
		return fmt.Errorf("workload: %s printed %q: %w", what, shortText(string(l.b), 200), err)
	}
	return nil
}

// Close ends the program (and its workers, if any are left).
func (d *DataLoader) Close() error { return d.py.close() }

const dataLoaderScript = "dataloader.py"
