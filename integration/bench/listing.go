package main

import (
	"context"
	"fmt"

	"github.com/stratafs/strata/integration/workload"
)

// listing is issue #3 workload 4: `ls -lR` over the listing tree, the first
// time and after a remount (strata keeps listings in its index).
type listing struct{}

func (listing) Name() string { return "listing" }
func (listing) Unit() string { return "entries/s" }

func (listing) Title(c Config) string {
	s := c.Scale.Listing
	return fmt.Sprintf("Listing: `ls -lR` (readdir + lstat of every entry) over %d keys in %d directories, one process",
		s.Keys, s.Dirs*s.SubDirs)
}

func (listing) AddData(d *workload.Dataset, s Scale) { d.Listing = &s.Listing }
func (listing) Prefix(s Scale) string                { return s.Listing.Prefix }

func (w listing) RunFS(ctx context.Context, p *Phases, fs FS) error {
	walk := func(ctx context.Context, _ int) (workload.Summary, error) {
		return workload.Walk(ctx, fs.Root(), p.Cap())
	}
	if err := p.Cold(ctx, "first listing", fs, perSecond, walk); err != nil {
		return err
	}
	if err := fs.Restart(ctx); err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	return p.Cold(ctx, "after remount", fs, perSecond, walk)
}

func (w listing) RunClient(ctx context.Context, p *Phases, g *workload.GetClient) error {
	prefix := w.Prefix(p.Env().Cfg.Scale) + "/"
	return p.Cold(ctx, "first listing", nil, perSecond, func(ctx context.Context, _ int) (workload.Summary, error) {
		return g.List(ctx, prefix)
	})
}
