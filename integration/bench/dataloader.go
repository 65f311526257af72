package main

import (
	"context"
	"fmt"

	"github.com/stratafs/strata/integration/workload"
)

// dataLoader is issue #18's real DataLoader: a PyTorch training epoch's
// data loading, torchvision.datasets.ImageFolder over JPEGs and
// torch.utils.data.DataLoader(num_workers=8, shuffle=True, batch_size=64)
// with the standard train transforms (RandomResizedCrop(224), flip,
// ToTensor, Normalize), run by Debian's python3 in a process of its own
// per system that runs every epoch, like a training job
// (integration/workload/python/dataloader.py). Cold epochs start
// on an emptied cache, warm ones on the cache the cold ones filled,
// restarted ones on a new mount of that cache; every phase runs
// Config.Repeat times on every system (remounting before each cold and
// restarted run), with the page cache and dentries dropped first.
type dataLoader struct{}

// DataLoader settings of issue #18.
const (
	loaderWorkers = 8
	loaderBatch   = 64
)

func (dataLoader) Name() string { return "dataloader" }
func (dataLoader) Unit() string { return "images/s" }

func (dataLoader) Title(c Config) string {
	s := c.Scale.JPEGFolder
	return fmt.Sprintf("PyTorch DataLoader: torchvision ImageFolder of %d JPEGs (%s–%s, ImageNet-like sizes) in %d classes, "+
		"DataLoader(num_workers=%d, shuffle=True, batch_size=%d), RandomResizedCrop(224)+flip+ToTensor+Normalize, "+
		"one epoch per run, %d runs per phase on every system; p50/p99 = the training loop's wait per batch",
		s.Files, workload.FormatSize(s.MinSize), workload.FormatSize(s.MaxSize), s.Dirs, loaderWorkers, loaderBatch, c.Repeat)
}

func (dataLoader) AddData(d *workload.Dataset, s Scale) { d.JPEGFolder = &s.JPEGFolder }
func (dataLoader) Prefix(s Scale) string                { return s.JPEGFolder.Prefix }

// Prerequisites: Python with PyTorch, torchvision and Pillow (which also
// make the dataset).
func (dataLoader) Prerequisites(ctx context.Context) (string, error) {
	v, err := workload.TorchVersions(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("DataLoader runs %s (%s)", workload.Python(), v), nil
}

func (w dataLoader) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	spec := e.Cfg.Scale.JPEGFolder
	total := workload.TotalSize(e.Manifest.Under(w.Prefix(e.Cfg.Scale)))
	// One Python process runs every epoch on this system, as a training
	// job would (importing torch takes seconds, untimed).
	dl, err := workload.StartDataLoader(ctx, workload.DataLoaderOpts{Root: fs.Root(), Workers: loaderWorkers,
		BatchSize: loaderBatch, MaxDuration: p.Cap()})
	if err != nil {
		return err
	}
	defer func() {
		if err := dl.Close(); err != nil {
			p.Progress("dataloader exit: %v", err)
		}
	}()
	// Every epoch (and repetition) has its own shuffle and crops.
	epoch := func(n uint64) phaseFunc {
		return func(ctx context.Context, rep int) (workload.Summary, error) {
			r, err := dl.Epoch(ctx, e.Cfg.Seed*1000+n*10+uint64(rep))
			if err != nil {
				return workload.Summary{}, err
			}
			if r.Classes != spec.Dirs || r.DatasetImages != spec.Files {
				return workload.Summary{}, fmt.Errorf("ImageFolder found %d images in %d classes, want %d in %d",
					r.DatasetImages, r.Classes, spec.Files, spec.Dirs)
			}
			return r.Summary(total, loaderWorkers), nil
		}
	}
	fresh := func(ctx context.Context, rep int) error {
		if rep == 0 {
			return nil // the mount was just opened on an empty cache
		}
		return fs.Fresh(ctx)
	}
	if err := p.Remounted(ctx, phaseCold, fs, perSecond, fresh, epoch(1)); err != nil {
		return err
	}
	if err := p.Warm(ctx, phaseWarm, fs, perSecond, epoch(2)); err != nil {
		return err
	}
	restart := func(ctx context.Context, _ int) error { return fs.Restart(ctx) }
	return p.Remounted(ctx, phaseRestart, fs, perSecond, restart, epoch(3))
}

// RunClient: a DataLoader reads files; the GET client has no row.
func (dataLoader) RunClient(context.Context, *Phases, *workload.GetClient) error { return nil }
