package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/prefetch"
)

// Options say what to serve and how.
type Options struct {
	// Config is the mount's settings (flags, config file), validated and
	// with CacheDir set. Start may change it: a source that takes no
	// writes turns ReadOnly on.
	Config *config.Config
	Source config.Source
	// Mountpoint is where Start mounts: an absolute path, or /dev/fd/N
	// for a /dev/fuse descriptor handed over by the CSI node plugin. Open
	// ignores it.
	Mountpoint string
	// Owner names, for Open, who holds the cache directory (other
	// processes' messages show it); Start's owner is "mount <Mountpoint>".
	Owner  string
	Logger *slog.Logger
	// Backing registers passthrough backing files for Start when the
	// process may not (a sidecar asks the CSI plugin); nil: itself.
	Backing fs.Backing
}

// Start brings a mount up. Every failure before the kernel has the
// filesystem is returned as one clear error and leaves nothing mounted.
func Start(ctx context.Context, o Options) (*Mount, error) {
	s := &Mount{cfg: o.Config, src: o.Source, mnt: o.Mountpoint, log: o.Logger}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := CheckMountpoint(s.mnt); err != nil {
		return nil, err
	}
	if err := s.open(ctx, "mount "+s.mnt, true); err != nil {
		return nil, err
	}
	cfg, src, log := s.cfg, s.src, s.log
	fo := fs.DefaultOptions()
	fo.UID, fo.GID = ownerIDs(cfg)
	fo.FileMode, fo.DirMode = uint32(cfg.FileMode), uint32(cfg.DirMode)
	fo.TTL = time.Duration(cfg.MetadataTTL)
	fo.Passthrough = cfg.Passthrough != "off"
	fo.RenameDirLimit = cfg.Write.RenameDirLimit
	fo.DirPrefetch = cfg.DirPrefetch
	if src.Scheme == "s3" || src.Scheme == "gs" {
		fo.MaxKeyLen = 1024 // both stores' documented limit, in UTF-8 bytes
		fo.UTF8Keys = true
	}
	if src.Scheme == "gs" {
		fo.KeyForbids = "\r\n" // GCS object names may not hold them
	}
	fo.Logger = log
	fo.Observe = opsObserver(s)
	s.fsys = fs.New(s.be.String(), src.Prefix, s.meta, s.store, s.fetch, fo)
	if err := startWrites(s); err != nil {
		return nil, err
	}
	mopts := fs.MountOptions{
		AllowOther: cfg.AllowOther, ReadOnly: cfg.ReadOnly, MaxRead: 1 << 20, MaxBackground: 128,
		ReadAheadKB: cfg.ReadAheadKB, ProbeDir: cfg.CacheDir, FsName: src.String(), Backing: o.Backing,
	}
	var err error
	if s.mounted, err = fs.Mount(s.mnt, s.fsys, mopts); err != nil {
		return nil, err
	}
	if cfg.Passthrough == "on" && !s.mounted.Passthrough {
		unmountNow(s)
		return nil, fmt.Errorf("--passthrough=on: passthrough is unavailable: %s", s.mounted.Why)
	}
	s.session = startSession(s)
	if err := startOps(s); err != nil {
		unmountNow(s)
		return nil, err
	}
	startBackground(s)
	s.warn(cacheSizeWarning(s.cfg.CacheSize, s.cfg.CacheDir, s.store.Used()))
	// Not offline: the cache then serves what it holds, and asking the
	// unreachable backend would only delay the mount by its retries.
	if !s.offline {
		s.warn(emptyPrefixWarning(ctx, s.be, src.String(), src.Prefix))
	}
	ok = true
	return s, nil
}

// Open builds what a mount builds, minus FUSE: backend, cache, metadata
// cache and fetcher, owning the cache dir as o.Owner (for `strata warm`
// when no mount serves the cache dir). Close releases it all.
func Open(ctx context.Context, o Options) (*Mount, error) {
	s := &Mount{cfg: o.Config, src: o.Source, log: o.Logger}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := os.MkdirAll(s.cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("--cache-dir %s: %w", s.cfg.CacheDir, err)
	}
	if err := s.open(ctx, o.Owner, false); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// open builds the stack Start and Open share, in order: the backend
// (counted for metrics when it serves a mount), the I/O engine, the cache
// store, the backend check, the shared tier, the metadata cache and the
// fetcher. The caller closes s on error.
func (s *Mount) open(ctx context.Context, owner string, serving bool) error {
	cfg, src, log := s.cfg, s.src, s.log
	var err error
	if s.be, err = openBackend(ctx, src, cfg); err != nil {
		return describeBackendErr(src, err)
	}
	if serving {
		s.be = instrumentBackend(s, s.be)
	}
	origin := s.be
	kind, _ := uring.ParseKind(cfg.IOEngine)
	if s.eng, err = uring.New(kind, uring.DefaultOptions()); err != nil {
		return fmt.Errorf("--io-engine %s: %w", cfg.IOEngine, err)
	}
	so := cache.DefaultOptions()
	so.BlockSize = int64(cfg.BlockSize)
	so.MaxBytes, so.MinFree = int64(cfg.CacheSize), 0
	if cfg.CacheSize == 0 {
		so.MinFree = config.MinFreeFraction
	}
	so.Engine, so.Logger, so.Owner = s.eng, log, owner
	so.Preload = serving // a restarted mount opens its recent files as a warm one
	cachetools.PrivateFiles()
	if s.store, err = cache.Open(cfg.CacheDir, so); err != nil {
		if !serving && errors.Is(err, cache.ErrLocked) {
			return fmt.Errorf("%w (retry once it is done, or use another --cache-dir)", err)
		}
		return fmt.Errorf("--cache-dir %s: %w", cfg.CacheDir, err)
	}
	if err := s.checkBackend(ctx); err != nil {
		return err
	}
	if s.be, err = wrapShared(ctx, s, origin); err != nil {
		return err
	}
	mo := meta.DefaultOptions()
	mo.TTL, mo.Logger = time.Duration(cfg.MetadataTTL), log
	mo.HeadBytes = min(int64(cfg.LookupFetch), int64(cfg.BlockSize))
	if !cfg.ListPrefetch {
		mo.ListPrefetch = 0
	}
	s.meta = meta.New(s.be, s.store.Index(), mo)
	po := prefetch.DefaultOptions()
	po.MaxFetches = cfg.MaxFetches
	po.PartBlocks = max(int64(cfg.PartSize/cfg.BlockSize), 1)
	po.InitialWindow = min(1<<20, int64(cfg.MaxReadahead))
	po.MaxWindow = int64(cfg.MaxReadahead)
	po.SmallObject = int64(cfg.SmallObject)
	// A fill larger than a quarter of the cache would evict what it
	// fetched before the reader comes back to it.
	po.FillMax = min(int64(cfg.RandomFill), s.store.Limit()/4)
	po.Logger = log
	s.fetch = prefetch.New(s.be, prefetch.NewBudget(int64(cfg.MemoryLimit), int64(cfg.BlockSize)), po)
	return nil
}

// WarmJob is a warm job of req on s's cache, for the source s serves.
func (s *Mount) WarmJob(req warm.Request) *warm.Job {
	return &warm.Job{Meta: s.meta, Store: s.store, Fetch: s.fetch, Source: s.be.String(), Root: s.src.Prefix, Req: req}
}
