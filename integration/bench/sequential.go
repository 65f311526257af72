package main

import (
	"context"
	"fmt"

	"github.com/stratafs/strata/integration/workload"
)

// sequential is issue #3 workload 2: WebDataset shards read sequentially
// with 1 MiB reads, one process per shard, all at once.
type sequential struct{}

func (sequential) Name() string { return "webdataset" }
func (sequential) Unit() string { return "MB/s" }

func (sequential) Title(c Config) string {
	s := c.Scale
	return fmt.Sprintf("WebDataset: %d shards of %s read sequentially with 1 MiB reads, %d at once",
		s.WebDataset.Shards, workload.FormatSize(s.WebDataset.ShardSize), s.ShardProcs)
}

func (sequential) AddData(d *workload.Dataset, s Scale) { d.WebDataset = &s.WebDataset }
func (sequential) Prefix(s Scale) string                { return s.WebDataset.Prefix }

func (w sequential) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	s := e.Cfg.Scale
	entries := e.Manifest.Under(w.Prefix(s))
	pass := func(n uint64) phaseFunc {
		return func(ctx context.Context, rep int) (workload.Summary, error) {
			return workload.ReadFiles(ctx, workload.ReadOpts{Root: fs.Root(), StripPrefix: w.Prefix(s),
				Entries: entries, Procs: s.ShardProcs, BufSize: 1 << 20, Shuffle: e.Cfg.Seed*1000 + n*10 + uint64(rep),
				Verify: e.Cfg.Verify, MaxDuration: p.Cap()})
		}
	}
	if err := p.Cold(ctx, "cold", fs, mbPerSecond, pass(1)); err != nil {
		return err
	}
	return p.Warm(ctx, "warm", fs, mbPerSecond, pass(2))
}

func (w sequential) RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error {
	e := p.Env()
	entries := e.Manifest.Under(w.Prefix(e.Cfg.Scale))
	return p.Cold(ctx, "cold", nil, mbPerSecond, func(ctx context.Context, _ int) (workload.Summary, error) {
		return g.GetObjects(ctx, entries, e.Cfg.Scale.ShardProcs)
	})
}
