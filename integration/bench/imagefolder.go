package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/stratafs/strata/integration/workload"
)

// imageFolder is issue #3 workload 1: small files read whole in shuffled
// order by several processes, two epochs, then epochs each on a mount just
// restarted (same cache dir). The readers are Python processes
// (python/readfiles.py), the outside reader a DataLoader's workers are:
// Python's open() costs a FUSE mount round trips a Go reader does not
// make (the isatty ioctl).
type imageFolder struct{}

func (imageFolder) Name() string { return "imagefolder" }
func (imageFolder) Unit() string { return "files/s" }

func (imageFolder) Title(c Config) string {
	s := c.Scale
	return fmt.Sprintf("ImageFolder: %d files of %s in %d dirs, %d Python processes (each file open(path, \"rb\"), read in 128 KiB chunks, closed, as a PyTorch Dataset reads a sample), shuffled",
		s.ImageFolder.Files, workload.FormatSize(s.ImageFolder.Size), s.ImageFolder.Dirs, s.ImageProcs)
}

func (imageFolder) AddData(d *workload.Dataset, s Scale) { d.ImageFolder = &s.ImageFolder }
func (imageFolder) Prefix(s Scale) string                { return s.ImageFolder.Prefix }

// Phase names shared with the targets.
const (
	phaseCold    = "cold (epoch 1)"
	phaseWarm    = "warm (epoch 2)"
	phaseRestart = "restarted mount"
)

func (w imageFolder) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	s := e.Cfg.Scale
	entries := e.Manifest.Under(w.Prefix(s))
	// Every epoch (and repetition) has its own shuffle.
	epoch := func(n uint64) phaseFunc {
		return func(ctx context.Context, rep int) (workload.Summary, error) {
			return workload.ReadFiles(ctx, workload.ReadOpts{Root: fs.Root(), StripPrefix: w.Prefix(s),
				Entries: entries, Procs: s.ImageProcs, BufSize: 128 << 10, Shuffle: e.Cfg.Seed*1000 + n*10 + uint64(rep),
				Verify: e.Cfg.Verify, MaxDuration: p.Cap(), Python: true})
		}
	}
	if err := p.Cold(ctx, phaseCold, fs, perSecond, epoch(1)); err != nil {
		return err
	}
	if err := p.Warm(ctx, phaseWarm, fs, perSecond, epoch(2)); err != nil {
		return err
	}
	// Each run of the restarted epoch is on a mount just restarted on the
	// warm cache, Repeat times like every phase (one run was one sample
	// of a machine that varies 1.5x from run to run).
	restart := func(ctx context.Context, _ int) error { return fs.Restart(ctx) }
	return p.Remounted(ctx, phaseRestart, fs, perSecond, restart, epoch(3))
}

func (w imageFolder) RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error {
	e := p.Env()
	entries := e.Manifest.Under(w.Prefix(e.Cfg.Scale))
	return p.Cold(ctx, phaseCold, nil, perSecond, func(ctx context.Context, _ int) (workload.Summary, error) {
		return g.GetObjects(ctx, entries, e.Cfg.Scale.ImageProcs)
	})
}

// bigFilePath is where the random-access file appears under a root.
func bigFilePath(root string, e *Env) (string, workload.FileEntry, error) {
	prefix := e.Cfg.Scale.BigFile.Prefix
	entries := e.Manifest.Under(prefix)
	if len(entries) == 0 {
		return "", workload.FileEntry{}, fmt.Errorf("no file under %s", prefix)
	}
	rel := entries[0].Path[len(prefix)+1:]
	return filepath.Join(root, filepath.FromSlash(rel)), entries[0], nil
}
