package main

import (
	"context"
	"fmt"

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
	if err := p.Cold(ctx, "first listing", fs, perSecond, walk); err != nil {
		return err
	}
	if err := fs.Restart(ctx); err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	return p.Cold(ctx, "after remount", fs, perSecond, walk)
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
