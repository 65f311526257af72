package main

import (
	"context"
	"fmt"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// random is issue #3 workload 3: preads of 4 KiB and 64 KiB at random
// aligned offsets of one big file (a memory-mapped token file's access
// pattern), from several processes.
type random struct{}

func (random) Name() string { return "random" }
func (random) Unit() string { return "ops/s" }

func (random) Title(c Config) string {
	s := c.Scale
	return fmt.Sprintf("Random access: 4 KiB and 64 KiB preads at random offsets of a %s file, %d processes (%d preads each cold, %d warm)",
		workload.FormatSize(s.BigFile.Size), s.RandProcs, s.RandColdOps, s.RandWarmOps)
}

func (random) AddData(d *workload.Dataset, s Scale) { d.BigFiles = &s.BigFile }
func (random) Prefix(s Scale) string                { return s.BigFile.Prefix }

// randomSizes are the pread sizes, each with its own phases.
var randomSizes = []int{4 << 10, 64 << 10}

func sizeName(n int) string { return workload.FormatSize(int64(n)) }

func (w random) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	s := e.Cfg.Scale
	preads := func(size, count int, seed uint64) phaseFunc {
		return func(ctx context.Context, rep int) (workload.Summary, error) {
			path, _, err := bigFilePath(fs.Root(), e)
			if err != nil {
				return workload.Summary{}, err
			}
			return workload.RandomReads(ctx, workload.PreadOpts{Path: path, Procs: s.RandProcs, Count: count,
				Size: size, Seed: e.Cfg.Seed*1000 + seed*10 + uint64(rep), MaxDuration: p.Cap()})
		}
	}
	// Each cold phase starts from an empty cache.
	for i, size := range randomSizes {
		if i > 0 {
			if err := fs.Fresh(ctx); err != nil {
				return fmt.Errorf("fresh mount: %w", err)
			}
		}
		if err := p.Cold(ctx, "cold "+sizeName(size), fs, perSecond, preads(size, s.RandColdOps, uint64(1+i))); err != nil {
			return err
		}
	}
	// Fill the cache with one sequential read of the whole file (untimed
	// as a row; the figure is logged).
	path, entry, err := bigFilePath(fs.Root(), e)
	if err != nil {
		return err
	}
	t0 := time.Now()
	fill, err := workload.ReadFiles(ctx, workload.ReadOpts{Root: fs.Root(), StripPrefix: w.Prefix(s),
		Entries: []workload.FileEntry{entry}, Procs: 1, BufSize: 1 << 20})
	if err != nil {
		return fmt.Errorf("fill %s: %w", path, err)
	}
	p.Progress("%-22s %s (%s)", "fill (untimed)", fill, time.Since(t0).Round(time.Millisecond))
	for i, size := range randomSizes {
		if err := p.Warm(ctx, "warm "+sizeName(size), fs, perSecond, preads(size, s.RandWarmOps, uint64(10+i))); err != nil {
			return err
		}
	}
	return nil
}

func (w random) RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error {
	e := p.Env()
	s := e.Cfg.Scale
	_, entry, err := bigFilePath("", e)
	if err != nil {
		return err
	}
	for i, size := range randomSizes {
		err := p.Cold(ctx, "cold "+sizeName(size), nil, perSecond, func(ctx context.Context, rep int) (workload.Summary, error) {
			return g.RandomRanges(ctx, entry.Path, entry.Size, size, s.RandColdOps, s.RandProcs, e.Cfg.Seed*1000+uint64(1+i)*10+uint64(rep), p.Cap())
		})
		if err != nil {
			return err
		}
	}
	return nil
}
