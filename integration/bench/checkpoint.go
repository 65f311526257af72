package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stratafs/strata/integration/workload"
)

// checkpoint is issue #13's (and #18's) checkpoint benchmark, written the
// way trainers write checkpoints, by a Python process of its own per
// system (integration/workload/python/checkpoint.py, Debian's
// python3-torch):
//
//   - torch.save of a state dict of Scale.CheckpointSize bytes of float32
//     tensors: the time until torch.save returned and the file was closed
//     (what the training loop waits for), the time until the bucket holds
//     the object whole (polled with HEAD from the bench, not strata sync),
//     and torch.load back through the mount (every tensor compared with
//     the one saved, and the file's sha256 with the bucket object's).
//   - torch.save again over the file just saved (the same state dict):
//     open(O_TRUNC) of an existing file, what a loop saving to one name
//     ("last.pt") does every time after the first.
//   - The Hugging Face Trainer's save (hfcheckpoint.go).
//
// Local disk is the baseline, and writes with fsync before close: a write
// left in the page cache is not yet on any disk, while strata's async
// close has its staging file fsync'd.
//
// Every phase runs Config.Repeat times on every system (Phases.Warm): each
// run writes files of its own names, so no run depends on an empty cache,
// and one run of a mount against the median of local disk's said nothing
// on a machine that varies 1.5x run to run.
type checkpoint struct{}

// Phase names (the targets use them).
const (
	phaseSave       = "torch.save"
	phaseSaveBucket = "torch.save → in bucket"
	phaseResave     = "torch.save over it"
	phaseLoad       = "torch.load"
	phaseHFWrite    = "HF writes"
	phaseHFRename   = "HF rename"
	phaseHFRmtree   = "HF rmtree"
	phaseHFBucket   = "HF → bucket exact"
)

func (checkpoint) Name() string   { return "checkpoint" }
func (checkpoint) Unit() string   { return "MB/s" }
func (checkpoint) Writable() bool { return true }

// OneLatency: the checkpoint runs in the last latency block only (see
// OneLatency).
func (checkpoint) OneLatency() bool { return true }

func (checkpoint) Title(c Config) string {
	size := workload.FormatSize(c.Scale.CheckpointSize)
	return fmt.Sprintf("Checkpoints as trainers write them (PyTorch in a process of its own): torch.save of a %s state dict "+
		"and torch.load back; the Hugging Face Trainer's save of %s (model.safetensors, optimizer.pt, scheduler.pt, "+
		"rng_state.pth, trainer_state.json into tmp-checkpoint-N/, os.rename to checkpoint-N, shutil.rmtree of the oldest "+
		"beyond 2). Rate = bytes / the time the row names (p50 column); local disk fsyncs before close; "+
		"\"in bucket\" times run from the start of the save until the bench's polling sees the object(s) whole",
		size, size)
}

// The checkpoint reads nothing: its prefix is an empty scratch part.
func (checkpoint) AddData(*workload.Dataset, Scale) {}
func (checkpoint) Prefix(Scale) string              { return "checkpoint" }

// Prerequisites: Python with PyTorch.
func (checkpoint) Prerequisites(ctx context.Context) (string, error) {
	v, err := workload.TorchVersions(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("checkpoints are written by %s (%s)", workload.Python(), v), nil
}

// ckptRun is what a workload run on one system shares between phases.
type ckptRun struct {
	p      *Phases
	fs     FS
	py     *workload.Checkpointer
	client *s3.Client
	bucket string
	prefix string
	local  bool
	tag    string
}

// key is the object a path under the mount becomes.
func (c *ckptRun) key(rel string) string { return c.prefix + "/" + filepath.ToSlash(rel) }

// timed is a single-operation summary whose p50/p99 cells show the time.
func timed(bytes int64, d time.Duration, note string) workload.Summary {
	return workload.Summary{Ops: 1, Bytes: bytes, Elapsed: d, P50: d, P99: d, Max: d, Procs: 1, Note: note}
}

func (w checkpoint) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	py, err := workload.StartCheckpointer(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := py.Close(); err != nil {
			p.Progress("checkpoint.py exit: %v", err)
		}
	}()
	prefix := w.Prefix(e.Cfg.Scale)
	c := &ckptRun{p: p, fs: fs, py: py, client: workload.NewS3Client(e.s3(e.MinIO.Endpoint)),
		bucket: e.Bucket(prefix), prefix: prefix, local: p.sys.Role == RoleLocal,
		// Names of their own per system, latency and run: the bucket is
		// shared, and a peer may not have deleted an earlier run's objects.
		tag: fmt.Sprintf("%s-%s-%d", p.sys.Name, p.lat, time.Now().UnixNano())}
	if err := c.torchSave(ctx); err != nil {
		return err
	}
	return c.huggingFace(ctx)
}

// torchSave measures torch.save, the object reaching the bucket, and
// torch.load, each rep on a file of its own.
func (c *ckptRun) torchSave(ctx context.Context) error {
	e := c.p.Env()
	size, seed := e.Cfg.Scale.CheckpointSize, e.Cfg.Seed
	names := map[int]string{}
	inBucket := map[int]workload.Summary{}
	save := func(ctx context.Context, rep int) (workload.Summary, error) {
		names[rep] = fmt.Sprintf("ckpt-%s-%d.pt", c.tag, rep)
		path := filepath.Join(c.fs.Root(), names[rep])
		r, err := c.py.Save(ctx, path, size, seed+uint64(rep), c.local)
		returned := time.Now()
		note := "torch.save + close"
		if c.local {
			note = "torch.save + fsync + close"
		}
		s := timed(r.Bytes, r.Close, fmt.Sprintf("%s %s, %d tensors", note, workload.FormatLatency(r.Close), r.Tensors))
		if err != nil || c.local {
			return s, err
		}
		seen, err := workload.WaitObject(ctx, c.client, c.bucket, c.key(names[rep]), r.Bytes, e.Cfg.Timeout)
		if err != nil {
			return s, err
		}
		after := seen.Sub(returned)
		inBucket[rep] = timed(r.Bytes, r.Close+after, fmt.Sprintf("whole in the bucket %s after torch.save returned",
			workload.FormatLatency(after)))
		return s, nil
	}
	if err := c.p.Warm(ctx, phaseSave, c.fs, mbPerSecond, save); err != nil {
		return err
	}
	if !c.local {
		err := c.p.Warm(ctx, phaseSaveBucket, nil, mbPerSecond, func(_ context.Context, rep int) (workload.Summary, error) {
			return inBucket[rep], nil
		})
		if err != nil {
			return err
		}
	}
	// The same bytes again: torch.save is deterministic, so the load
	// below compares with the bucket whichever save it holds.
	resave := func(ctx context.Context, rep int) (workload.Summary, error) {
		path := filepath.Join(c.fs.Root(), names[rep])
		r, err := c.py.Save(ctx, path, size, seed+uint64(rep), c.local)
		note := "torch.save + close over an existing file"
		if c.local {
			note = "torch.save + fsync + close over an existing file"
		}
		return timed(r.Bytes, r.Close, fmt.Sprintf("%s %s", note, workload.FormatLatency(r.Close))), err
	}
	if err := c.p.Warm(ctx, phaseResave, c.fs, mbPerSecond, resave); err != nil {
		return err
	}
	load := func(ctx context.Context, rep int) (workload.Summary, error) {
		path := filepath.Join(c.fs.Root(), names[rep])
		r, err := c.py.Load(ctx, path, size, seed+uint64(rep))
		s := timed(r.Bytes, r.Load, fmt.Sprintf("torch.load %s, every tensor equal to the one saved", workload.FormatLatency(r.Load)))
		if err != nil {
			return s, err
		}
		if !c.local {
			sum, err := workload.ObjectSHA256(ctx, c.client, c.bucket, c.key(names[rep]))
			if err != nil {
				return s, err
			}
			if sum != r.SHA256 {
				return s, fmt.Errorf("sha256 read back %s, the bucket object's %s", r.SHA256, sum)
			}
			s.Note += ", sha256 = the bucket object's"
		}
		if err := os.Remove(path); err != nil {
			return s, fmt.Errorf("remove %s: %w", path, err)
		}
		return s, nil
	}
	return c.p.Warm(ctx, phaseLoad, c.fs, mbPerSecond, load)
}

// Strata's upload defaults (backend/s3 DefaultOptions): the reference
// upload sends the same parts with the same concurrency.
const (
	refPartSize = 16 << 20
	refParts    = 8
)

// RunClient is the reference for "torch.save → in bucket": the same
// torch.save file, written to local disk first (untimed), sent as one plain
// multipart upload of 16 MiB parts, 8 in flight (Strata's defaults), timed
// until CompleteMultipartUpload answered.
func (w checkpoint) RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error {
	e := p.Env()
	size, seed := e.Cfg.Scale.CheckpointSize, e.Cfg.Seed
	py, err := workload.StartCheckpointer(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := py.Close(); err != nil {
			p.Progress("checkpoint.py exit: %v", err)
		}
	}()
	dir, err := os.MkdirTemp(e.Cfg.WorkDir, "ckpt-ref-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ckpt.pt")
	r, err := py.Save(ctx, path, size, seed, false)
	if err != nil {
		return err
	}
	prefix := w.Prefix(e.Cfg.Scale)
	return p.Cold(ctx, phaseSaveBucket, nil, mbPerSecond, func(ctx context.Context, rep int) (workload.Summary, error) {
		key := fmt.Sprintf("%s/ckpt-ref-%s-%d-%d.pt", prefix, p.lat, rep, time.Now().UnixNano())
		start := time.Now()
		err := workload.MultipartUpload(ctx, g.S3, g.Bucket, key, path, refPartSize, refParts)
		d := time.Since(start)
		return timed(r.Bytes, d, fmt.Sprintf("plain multipart upload of the torch.save file, %d MiB parts, %d in flight: %s",
			refPartSize>>20, refParts, workload.FormatLatency(d))), err
	})
}
