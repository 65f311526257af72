package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/prefetch"
)

// warmJobForMount turns a control-socket warm request into a job on the
// running mount, whose source must contain the one asked for.
func warmJobForMount(s *server, req control.Request) (*warm.Job, error) {
	want, err := config.ParseSource(req.Source)
	if err != nil {
		return nil, err
	}
	if req.Endpoint != "" && req.Endpoint != s.cfg.EndpointURL {
		return nil, fmt.Errorf("this cache dir is mounted from %s with endpoint %q, not %q; use another --cache-dir", s.src, s.cfg.EndpointURL, req.Endpoint)
	}
	rel, ok := relativeSource(s.src, want)
	if !ok {
		return nil, fmt.Errorf("this cache dir is mounted from %s; %s is not under it (warm a source under it, or use another --cache-dir)", s.src, want)
	}
	r := warm.Request{Prefix: rel + req.Prefix, Concurrency: req.Concurrency}
	if r.Concurrency <= 0 || r.Concurrency > 4096 {
		r.Concurrency = s.cfg.Ops.WarmConcurrency
	}
	for _, p := range req.Paths {
		r.Paths = append(r.Paths, rel+strings.TrimPrefix(p, "/"))
	}
	return &warm.Job{Meta: s.meta, Store: s.store, Fetch: s.fetch, Source: s.be.String(), Root: s.src.Prefix, Req: r}, nil
}

// relativeSource returns the key prefix of want below mounted ("" or
// ending in "/"), if want is mounted or lies under it.
func relativeSource(mounted, want config.Source) (string, bool) {
	if mounted.Scheme != want.Scheme {
		return "", false
	}
	if want.Scheme == "file" {
		switch {
		case want.Path == mounted.Path:
			return "", true
		case strings.HasPrefix(want.Path, strings.TrimSuffix(mounted.Path, "/")+"/"):
			return strings.TrimPrefix(want.Path, strings.TrimSuffix(mounted.Path, "/")+"/") + "/", true
		}
		return "", false
	}
	if want.Bucket != mounted.Bucket || !strings.HasPrefix(want.Prefix, mounted.Prefix) {
		return "", false
	}
	return strings.TrimPrefix(want.Prefix, mounted.Prefix), true
}

// openOffline builds what a mount builds, minus FUSE: backend, cache,
// metadata cache and fetcher, owning the cache dir as `owner`. close()
// releases it all.
func openOffline(ctx context.Context, cfg *config.Config, src config.Source, log *slog.Logger, owner string) (*server, error) {
	s := &server{cfg: cfg, src: src, log: log}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("--cache-dir %s: %w", cfg.CacheDir, err)
	}
	var err error
	if s.be, err = openBackend(ctx, src, cfg); err != nil {
		return nil, describeBackendErr(src, err)
	}
	origin := s.be
	kind, _ := uring.ParseKind(cfg.IOEngine)
	if s.eng, err = uring.New(kind, uring.DefaultOptions()); err != nil {
		return nil, fmt.Errorf("--io-engine %s: %w", cfg.IOEngine, err)
	}
	so := cache.DefaultOptions()
	so.BlockSize = int64(cfg.BlockSize)
	so.MaxBytes, so.MinFree = int64(cfg.CacheSize), 0
	if cfg.CacheSize == 0 {
		so.MinFree = config.MinFreeFraction
	}
	so.Engine, so.Logger, so.Owner = s.eng, log, owner
	cachetools.PrivateFiles()
	if s.store, err = cache.Open(cfg.CacheDir, so); err != nil {
		if errors.Is(err, cache.ErrLocked) {
			return nil, fmt.Errorf("%w (retry once it is done, or use another --cache-dir)", err)
		}
		return nil, fmt.Errorf("--cache-dir %s: %w", cfg.CacheDir, err)
	}
	if err := s.checkBackend(ctx); err != nil {
		return nil, err
	}
	if s.be, err = wrapShared(ctx, s, origin); err != nil {
		return nil, err
	}
	mo := meta.DefaultOptions()
	mo.TTL, mo.Logger = time.Duration(cfg.MetadataTTL), log
	s.meta = meta.New(s.be, s.store.Index(), mo)
	po := prefetch.DefaultOptions()
	po.MaxFetches = cfg.MaxFetches
	po.PartBlocks = max(int64(cfg.PartSize/cfg.BlockSize), 1)
	po.Logger = log
	s.fetch = prefetch.New(s.be, prefetch.NewBudget(int64(cfg.MemoryLimit), int64(cfg.BlockSize)), po)
	ok = true
	return s, nil
}

// warmOffline warms a cache dir nobody holds.
func warmOffline(ctx context.Context, cfg *config.Config, src config.Source, req warm.Request, blockSizeSet bool, show func(warm.Progress)) (warm.Progress, error) {
	if !blockSizeSet {
		if bs, ok := cachetools.BlockSize(cfg.CacheDir); ok {
			cfg.BlockSize = config.Size(bs)
			if cfg.PartSize < cfg.BlockSize {
				cfg.PartSize = cfg.BlockSize
			}
		}
	}
	level := "warn" // info lines would break the progress bar
	if cfg.LogLevel == "debug" || cfg.LogLevel == "error" {
		level = cfg.LogLevel
	}
	log := newLogger(os.Stderr, level, "text")
	s, err := openOffline(ctx, cfg, src, log, "warm "+src.String())
	if err != nil {
		return warm.Progress{}, err
	}
	defer s.close()
	job := &warm.Job{Meta: s.meta, Store: s.store, Fetch: s.fetch, Source: s.be.String(), Root: src.Prefix, Req: req}
	return job.Run(ctx, show)
}
