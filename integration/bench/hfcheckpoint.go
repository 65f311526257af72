package main

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// hfKeep is the Trainer's save_total_limit in the benchmark.
const hfKeep = 2

// hfSettle bounds the wait for the bucket to hold exactly the checkpoints
// kept after a step (2 GiB uploads in well under a minute here): a
// system that leaves a stray object (rclone, when a rename overtakes an
// upload, may leave the temporary name) fails its row after it instead of
// holding the run for the whole per-system timeout.
const hfSettle = 5 * time.Minute

// huggingFace measures the Hugging Face Trainer's checkpoint save in a
// directory of its own: two untimed steps first (so that every measured
// step removes the oldest checkpoint, as a long training run does), then
// one measured step per run: the writes into tmp-checkpoint-N/, the
// os.rename to checkpoint-N, the shutil.rmtree of the oldest, and (on
// mounts) the time from the start of the step until the bucket holds
// exactly the objects of the checkpoints left: every file whole, nothing
// of tmp-checkpoint-N or of the removed checkpoint.
func (c *ckptRun) huggingFace(ctx context.Context) error {
	e := c.p.Env()
	size, seed := e.Cfg.Scale.CheckpointSize, e.Cfg.Seed
	dir := "hf-" + c.tag
	root := filepath.Join(c.fs.Root(), dir)
	files := map[string]map[string]int64{} // checkpoint-N -> its files
	step := 0
	// run does the next step and waits for the bucket; it returns the
	// step's result and how long after the step's start the bucket held
	// exactly the right objects.
	run := func(ctx context.Context) (workload.HFResult, time.Duration, error) {
		step++
		r, err := c.py.HF(ctx, root, step, size, seed, c.local, hfKeep)
		returned := time.Now()
		if err != nil {
			return r, 0, err
		}
		files[fmt.Sprintf("checkpoint-%d", step)] = r.Files
		if len(r.Checkpoints) != min(step, hfKeep) {
			return r, 0, fmt.Errorf("step %d left checkpoints %v", step, r.Checkpoints)
		}
		if c.local {
			return r, 0, nil
		}
		want := map[string]int64{}
		for _, ck := range r.Checkpoints {
			for name, size := range files[ck] {
				want[c.key(path.Join(dir, ck, name))] = size
			}
		}
		seen, err := workload.WaitObjects(ctx, c.client, c.bucket, c.key(dir)+"/", want, min(e.Cfg.Timeout, hfSettle))
		if err != nil {
			return r, 0, err
		}
		return r, r.Write + r.Rename + r.Rmtree + seen.Sub(returned), nil
	}
	for range hfKeep {
		if _, _, err := run(ctx); err != nil {
			return fmt.Errorf("untimed Hugging Face step %d: %w", step, err)
		}
	}
	c.p.Progress("%d untimed Hugging Face checkpoint steps done", hfKeep)
	steps := map[int]workload.HFResult{}
	inBucket := map[int]time.Duration{}
	write := func(ctx context.Context, rep int) (workload.Summary, error) {
		r, seen, err := run(ctx)
		steps[rep], inBucket[rep] = r, seen
		note := "5 files written + closed"
		if c.local {
			note = "5 files written + fsync'd + closed"
		}
		return timed(r.Bytes(), r.Write, fmt.Sprintf("%s in %s", note, workload.FormatLatency(r.Write))), err
	}
	if err := c.p.Warm(ctx, phaseHFWrite, c.fs, mbPerSecond, write); err != nil {
		return err
	}
	report := func(phase string, get func(workload.HFResult, int) (time.Duration, string)) error {
		return c.p.Warm(ctx, phase, nil, mbPerSecond, func(_ context.Context, rep int) (workload.Summary, error) {
			r := steps[rep]
			d, note := get(r, rep)
			return timed(r.Bytes(), d, note), nil
		})
	}
	err := report(phaseHFRename, func(r workload.HFResult, _ int) (time.Duration, string) {
		return r.Rename, fmt.Sprintf("os.rename of tmp-checkpoint-N/ (%s) %s", workload.FormatSize(r.Bytes()),
			workload.FormatLatency(r.Rename))
	})
	if err == nil {
		err = report(phaseHFRmtree, func(r workload.HFResult, _ int) (time.Duration, string) {
			return r.Rmtree, fmt.Sprintf("shutil.rmtree of %v %s", r.Removed, workload.FormatLatency(r.Rmtree))
		})
	}
	if err == nil && !c.local {
		err = report(phaseHFBucket, func(r workload.HFResult, rep int) (time.Duration, string) {
			return inBucket[rep], fmt.Sprintf("bucket holds exactly %v %s after the step began",
				r.Checkpoints, workload.FormatLatency(inBucket[rep]))
		})
	}
	return err
}
