package main

import (
	"context"
	"fmt"

	"github.com/stratafs/strata/integration/workload"
)

// tarShards is issue #18's WebDataset-style tar shard reader in Python,
// the sequential counterpart of the DataLoader: the WebDataset shards
// streamed with Python's tarfile module (mode "r|") in
// torch.utils.data.DataLoader workers over an IterableDataset, one worker
// per shard at a time, ShardProcs at once, every member's bytes read and
// grouped into samples, batched by 64 in the workers
// (integration/workload/python/tarshards.py), in one Python process per
// system that runs every epoch. Phases as the DataLoader's: cold on an
// emptied cache, warm, restarted on a new mount of the warm cache, each
// Config.Repeat times on every system.
type tarShards struct{}

const tarShardsBatch = 64

func (tarShards) Name() string { return "webdataset-py" }
func (tarShards) Unit() string { return "MB/s" }

// OneLatency: the Python shard reader runs in the last latency block only.
// It is bound by tarfile on the CPU (115-180 MB/s even from local disk on
// the published 2-core VM), it is the longest workload of `make bench`
// after the DataLoader, and the Go shard readers of `make bench-paths`
// measure sequential reads at every latency.
func (tarShards) OneLatency() bool { return true }

func (tarShards) Title(c Config) string {
	s := c.Scale
	per, _ := s.WebDataset.ShardContents()
	return fmt.Sprintf("WebDataset in Python: %d shards of %s (%d samples each) streamed with tarfile (mode \"r|\") "+
		"in DataLoader(num_workers=%d) workers over an IterableDataset, batches of %d, %d runs per phase on every system; "+
		"MB/s of member bytes; p50/p99 = the training loop's wait per batch",
		s.WebDataset.Shards, workload.FormatSize(s.WebDataset.ShardSize), per, s.ShardProcs, tarShardsBatch, c.Repeat)
}

func (tarShards) AddData(d *workload.Dataset, s Scale) { d.WebDataset = &s.WebDataset }
func (tarShards) Prefix(s Scale) string                { return s.WebDataset.Prefix }

// Prerequisites: Python with PyTorch (the check is the DataLoader's).
func (tarShards) Prerequisites(ctx context.Context) (string, error) {
	v, err := workload.TorchVersions(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("tar shards streamed by %s (%s)", workload.Python(), v), nil
}

func (tarShards) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	spec := e.Cfg.Scale.WebDataset
	perShard, perShardBytes := spec.ShardContents()
	ts, err := workload.StartTarShards(ctx, workload.TarShardsOpts{Root: fs.Root(), Streams: e.Cfg.Scale.ShardProcs,
		BatchSize: tarShardsBatch, MaxDuration: p.Cap()})
	if err != nil {
		return err
	}
	defer func() {
		if err := ts.Close(); err != nil {
			p.Progress("tarshards exit: %v", err)
		}
	}()
	epoch := func(ctx context.Context, _ int) (workload.Summary, error) {
		r, err := ts.Epoch(ctx)
		if err != nil {
			return workload.Summary{}, err
		}
		if r.Shards != spec.Shards {
			return workload.Summary{}, fmt.Errorf("found %d shards, want %d", r.Shards, spec.Shards)
		}
		if !r.Truncated && (r.Samples != spec.Shards*perShard || r.Bytes != int64(spec.Shards)*perShardBytes) {
			return workload.Summary{}, fmt.Errorf("read %d samples (%d bytes), want %d (%d bytes)",
				r.Samples, r.Bytes, spec.Shards*perShard, int64(spec.Shards)*perShardBytes)
		}
		return r.Summary(), nil
	}
	fresh := func(ctx context.Context, rep int) error {
		if rep == 0 {
			return nil // the mount was just opened on an empty cache
		}
		return fs.Fresh(ctx)
	}
	if err := p.Remounted(ctx, phaseCold, fs, mbPerSecond, fresh, epoch); err != nil {
		return err
	}
	if err := p.Warm(ctx, phaseWarm, fs, mbPerSecond, epoch); err != nil {
		return err
	}
	restart := func(ctx context.Context, _ int) error { return fs.Restart(ctx) }
	return p.Remounted(ctx, phaseRestart, fs, mbPerSecond, restart, epoch)
}

// RunClient: the shards are read through files; the webdataset
// workload's GET client row is the reference.
func (tarShards) RunClient(context.Context, *Phases, *workload.GetClient) error { return nil }
