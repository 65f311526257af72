package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// listing is issue #3 workload 4: `ls -lR` over a listing tree, the first
// time and after a remount (strata keeps listings in its index). Two
// trees: listingWide (few directories of many keys: the server's listing
// rate shows) and listingDeep (issue #15's many small directories: one
// round trip per directory shows).
type listing struct {
	name string
	spec func(Scale) *workload.ListingSpec
	set  func(*workload.Dataset, *workload.ListingSpec)
}

var (
	listingWide = listing{"listing", func(s Scale) *workload.ListingSpec { return &s.Listing },
		func(d *workload.Dataset, l *workload.ListingSpec) { d.Listing = l }}
	listingDeep = listing{"listing-deep", func(s Scale) *workload.ListingSpec { return &s.ListingDeep },
		func(d *workload.Dataset, l *workload.ListingSpec) { d.ListingDeep = l }}
)

func (w listing) Name() string { return w.name }
func (listing) Unit() string   { return "entries/s" }

func (w listing) Title(c Config) string {
	s := w.spec(c.Scale)
	return fmt.Sprintf("Listing: `ls -lR` (readdir + lstat of every entry) over %d keys in %d directories, one process",
		s.Keys, s.Dirs*s.SubDirs)
}

func (w listing) AddData(d *workload.Dataset, s Scale) { w.set(d, w.spec(s)) }
func (w listing) Prefix(s Scale) string                { return w.spec(s).Prefix }

func (w listing) RunFS(ctx context.Context, p *Phases, fs FS) error {
	walk := func(ctx context.Context, _ int) (workload.Summary, error) {
		return workload.Walk(ctx, fs.Root(), p.Cap())
	}
	if w.name == listingWide.name {
		// Issue #15: from mount to the first batch read, on the bucket of
		// (at full scale) 100,000 keys; then the listing, on a new empty
		// cache.
		// Every run empties the cache and mounts again itself, so it is
		// repeated on every system, like a cold epoch.
		mounts := func(context.Context, int) error { return nil }
		if err := p.Remounted(ctx, phaseFirstBatch, nil, perSecond, mounts, w.firstBatch(p, fs)); err != nil {
			return err
		}
		if err := fs.Fresh(ctx); err != nil {
			return fmt.Errorf("remount: %w", err)
		}
	}
	if err := p.Cold(ctx, "first listing", fs, perSecond, walk); err != nil {
		return err
	}
	if err := fs.Restart(ctx); err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	return p.Cold(ctx, "after remount", fs, perSecond, walk)
}

// phaseFirstBatch times a new mount and its first batch.
const phaseFirstBatch = "mount to first batch"

// firstBatchFiles is the batch: a DataLoader's batch of 256 samples.
const firstBatchFiles = 256

// firstBatch is the phase: unmount and empty the cache (untimed), then
// mount and read firstBatchFiles files picked at random from the tree (by
// path, as a sampler hands out indices into a file list made earlier) in
// the ImageFolder's Python reader processes, timed from the mount command
// to the last byte. The rate is files/s over that time; the note says how
// much of it the mount took.
func (w listing) firstBatch(p *Phases, fs FS) phaseFunc {
	return func(ctx context.Context, rep int) (workload.Summary, error) {
		e := p.Env()
		prefix := w.Prefix(e.Cfg.Scale)
		entries := e.Manifest.Under(prefix)
		keys := len(entries)
		rand.New(rand.NewPCG(e.Cfg.Seed, uint64(rep))).Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
		entries = entries[:min(firstBatchFiles, len(entries))]
		if err := fs.Empty(ctx); err != nil {
			return workload.Summary{}, fmt.Errorf("empty: %w", err)
		}
		e.Drop()
		start := time.Now()
		if err := fs.Mount(ctx); err != nil {
			return workload.Summary{}, fmt.Errorf("mount: %w", err)
		}
		mounted := time.Since(start)
		s, err := workload.ReadFiles(ctx, workload.ReadOpts{Root: fs.Root(), StripPrefix: prefix, Entries: entries,
			Procs: e.Cfg.Scale.ImageProcs, Verify: e.Cfg.Verify, MaxDuration: p.Cap(), Python: true})
		if err != nil {
			return s, err
		}
		s.Elapsed = time.Since(start)
		s.Note = fmt.Sprintf("%d files of a %d-key tree in %s from the mount command (mount %s), %d Python readers",
			len(entries), keys, s.Elapsed.Round(time.Millisecond), mounted.Round(time.Millisecond), e.Cfg.Scale.ImageProcs)
		return s, nil
	}
}

// RunClient: the GET client lists the tree flat (no delimiter, one
// request per 1,000 keys, as rclone lsf -R or aws s3 ls --recursive do),
// then one directory at a time (a delimited listing per directory, as a
// client walking the tree does).
func (w listing) RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error {
	prefix := w.Prefix(p.Env().Cfg.Scale) + "/"
	if err := p.Cold(ctx, "first listing", nil, perSecond, func(ctx context.Context, _ int) (workload.Summary, error) {
		return g.List(ctx, prefix)
	}); err != nil {
		return err
	}
	return p.Cold(ctx, phasePerDirectory, nil, perSecond, func(ctx context.Context, _ int) (workload.Summary, error) {
		return g.ListTree(ctx, prefix)
	})
}

// phasePerDirectory is the GET client's tree walk.
const phasePerDirectory = "first listing, per directory"
