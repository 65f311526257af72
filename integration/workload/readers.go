package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"
)

// ReadOpts describes a data-loader style pass over files.
type ReadOpts struct {
	// Root is where the dataset's root appears (a local directory or a
	// mount point); Entries are paths relative to it.
	Root    string
	Entries []FileEntry
	// StripPrefix is removed from each entry's path first (when Root is a
	// mount of "bucket/<prefix>").
	StripPrefix string
	// Procs reader processes; file i of the shuffled order goes to process
	// i mod Procs, as DataLoader hands batches to workers in turn.
	Procs int
	// BufSize is the read(2) size (default 128 KiB, what Python's buffered
	// reader uses on a filesystem reporting st_blksize 128 KiB).
	BufSize int
	// Shuffle, if not zero, seeds the permutation (a new seed per epoch);
	// zero keeps manifest order.
	Shuffle uint64
	// Verify checks every file's sha256 against the manifest.
	Verify bool
	// MaxDuration caps the pass (0: none).
	MaxDuration time.Duration
	// Python reads with python/readfiles.py processes (builtins.open, as a
	// PyTorch Dataset reads a sample: the outside reader of the published
	// figures) instead of Go workers.
	Python bool
}

// ReadFiles reads every entry whole, in Procs separate processes, and
// summarises files/s, MB/s and per-file latency. A file whose size differs
// from its entry's fails the pass.
func ReadFiles(ctx context.Context, o ReadOpts) (Summary, error) {
	if o.Procs <= 0 {
		o.Procs = 1
	}
	order := Shuffled(len(o.Entries), o.Shuffle)
	tasks := make([]Task, min(o.Procs, max(len(order), 1)))
	for i := range tasks {
		tasks[i] = Task{Op: OpReadFiles, BufSize: o.BufSize, MaxDuration: o.MaxDuration}
	}
	for i, idx := range order {
		e := o.Entries[idx]
		rel, err := relPath(e.Path, o.StripPrefix)
		if err != nil {
			return Summary{}, err
		}
		t := &tasks[i%len(tasks)]
		t.Paths = append(t.Paths, filepath.Join(o.Root, filepath.FromSlash(rel)))
		t.Sizes = append(t.Sizes, e.Size)
		if o.Verify {
			t.SHA256 = append(t.SHA256, e.SHA256)
		}
	}
	var res []WorkerResult
	var err error
	if o.Python {
		var script string
		if script, err = writeScript(readFilesScript); err != nil {
			return Summary{}, err
		}
		res, err = runWorkers(ctx, []string{Python(), script}, tasks)
	} else {
		res, err = RunWorkers(ctx, tasks)
	}
	if err != nil {
		return Summary{}, err
	}
	return Summarize(res), nil
}

// readFilesScript is the Python reader process.
const readFilesScript = "readfiles.py"

// Shuffled returns a permutation of 0..n-1 drawn from seed (identity for
// seed 0).
func Shuffled(n int, seed uint64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if seed != 0 {
		r := rand.New(rand.NewPCG(seed, 0xda7a))
		r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

func relPath(p, strip string) (string, error) {
	if strip == "" {
		return p, nil
	}
	strip = trimSlashes(strip) + "/"
	if len(p) < len(strip) || p[:len(strip)] != strip {
		return "", fmt.Errorf("workload: %s is not under %s", p, strip)
	}
	return p[len(strip):], nil
}

func trimSlashes(s string) string {
	for len(s) > 0 && s[0] == '/' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// PreadOpts describes random positioned reads in one file.
type PreadOpts struct {
	Path string
	// Procs processes each do Count preads of Size bytes.
	Procs, Count, Size int
	// Seed picks the offsets (each process gets its own stream).
	Seed        uint64
	MaxDuration time.Duration
}

// RandomReads runs fio-randread-like preads in Procs processes and
// summarises ops/s and per-read latency.
func RandomReads(ctx context.Context, o PreadOpts) (Summary, error) {
	if o.Procs <= 0 {
		o.Procs = 1
	}
	tasks := make([]Task, o.Procs)
	for i := range tasks {
		tasks[i] = Task{Op: OpPread, Path: o.Path, Size: o.Size, Count: o.Count,
			Seed: o.Seed*1000 + uint64(i) + 1, MaxDuration: o.MaxDuration}
	}
	res, err := RunWorkers(ctx, tasks)
	if err != nil {
		return Summary{}, err
	}
	return Summarize(res), nil
}

// Walk lists root recursively like `ls -lR` in one process and
// summarises entries/s (Ops are entries, latencies are per directory).
func Walk(ctx context.Context, root string, maxDuration time.Duration) (Summary, error) {
	res, err := RunWorkers(ctx, []Task{{Op: OpWalk, Root: root, MaxDuration: maxDuration}})
	if err != nil {
		return Summary{}, err
	}
	return Summarize(res), nil
}
