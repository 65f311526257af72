package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// measure reads the dataset twice through the mount and once from the
// source directory, and collects cache statistics.
func (d *demo) measure(ctx context.Context, res *Result, m *workload.Manifest, mnt *workload.Mount, spec workload.MountSpec, dataDir string) error {
	cfg := d.cfg
	pass := func(root string, epoch uint64, verify bool) (workload.Summary, error) {
		if res.DropErr == nil {
			_ = workload.DropPageCache()
		}
		return workload.ReadFiles(ctx, workload.ReadOpts{Root: root, Entries: m.Files, Procs: cfg.Procs,
			BufSize: 128 << 10, Shuffle: cfg.Seed*100 + epoch, Verify: verify})
	}
	var stats func(t time.Time) (*workload.CacheStats, error)
	if cfg.Mounter == "strata" {
		bin, err := workload.Tool("strata")
		if err != nil {
			return err
		}
		stats = func(t time.Time) (*workload.CacheStats, error) {
			cs, err := workload.StrataStatsAfter(ctx, bin, spec.CacheDir, t)
			return &cs, err
		}
	}
	d.say("Reading all %d files whole, in a new shuffled order each pass, with %d processes:", res.Files, cfg.Procs)
	var s0, s1 *workload.CacheStats
	if stats != nil {
		s0, res.StatsErr = stats(time.Now())
	}
	var err error
	if err = d.step("epoch 1 (cold: from "+serverName(cfg)+")", func() (string, error) {
		res.Epoch1, err = pass(mnt.Root, 1, false)
		return res.Epoch1.String(), err
	}); err != nil {
		return err
	}
	if stats != nil && res.StatsErr == nil {
		s1, res.StatsErr = stats(time.Now())
	}
	if err = d.step("epoch 2 (warm: from the local cache)", func() (string, error) {
		res.Epoch2, err = pass(mnt.Root, 2, false)
		return res.Epoch2.String(), err
	}); err != nil {
		return err
	}
	if stats != nil && res.StatsErr == nil {
		var s2 *workload.CacheStats
		if s2, res.StatsErr = stats(time.Now()); res.StatsErr == nil {
			e1, e2 := s1.Sub(*s0), s2.Sub(*s1)
			res.Stats1, res.Stats2 = &e1, &e2
		}
	}
	if cfg.Verify {
		if err = d.step("checking the sha256 of every file read through the mount", func() (string, error) {
			s, err := workload.ReadFiles(ctx, workload.ReadOpts{Root: mnt.Root, Entries: m.Files, Procs: cfg.Procs,
				BufSize: 1 << 20, Verify: true})
			res.Verified = s.Verified
			return fmt.Sprintf("%d of %d match", s.Verified, res.Files), err
		}); err != nil {
			return err
		}
	}
	if err = d.step("the same read of the source directory on local disk", func() (string, error) {
		res.Local, err = pass(dataDir, 2, false)
		return res.Local.String(), err
	}); err != nil {
		return err
	}
	// Unmounted, the cache dir's index can be read: the final figures.
	if err = d.step("unmounting", func() (string, error) { return "", mnt.Unmount(ctx) }); err != nil {
		return err
	}
	if stats != nil && res.StatsErr == nil {
		res.Final, res.StatsErr = stats(time.Time{})
	}
	return nil
}

func serverName(cfg Config) string {
	if cfg.Backend == "gcs" {
		return "fake-gcs-server"
	}
	return "MinIO"
}

func replaceAll(s, old, repl string) string { return strings.ReplaceAll(s, old, repl) }
