package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/prefetch"
)

// server is one running mount and everything it owns, closed in reverse.
type server struct {
	cfg     *config.Config
	src     config.Source
	mnt     string
	log     *slog.Logger
	be      backend.Backend
	eng     uring.Engine
	store   *cache.Store
	meta    *meta.Cache
	fetch   *prefetch.Fetcher
	fsys    *fs.FS
	mounted *fs.Mounted
	session *sessionWriter
	wb      *writeback.Manager
	shared  *sharedState // shared.go
	ops     *opsState    // ops.go
	stopBg  func()       // warmonmount.go
	bgDone  chan struct{}
}

// checkMountpoint rejects a mountpoint that is missing, not a directory,
// or already mounted (including the dead mount a crashed process leaves).
func checkMountpoint(p string) error {
	if strings.HasPrefix(p, "/dev/fd/") {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		if errors.Is(err, unix.ENOTCONN) {
			return fmt.Errorf("mountpoint %s: a previous mount died there (transport endpoint is not connected); run `umount %s` first", p, p)
		}
		return fmt.Errorf("mountpoint %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("mountpoint %s: not a directory", p)
	}
	if isMountpoint(p) {
		return fmt.Errorf("mountpoint %s is busy: something is already mounted there", p)
	}
	return nil
}

// isMountpoint reports whether p is the root of a mount.
func isMountpoint(p string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountinfo(f[4]) == p {
			return true
		}
	}
	return false
}

func unescapeMountinfo(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// start brings a mount up. Every failure before the kernel has the
// filesystem is returned as one clear error and leaves nothing mounted.
func start(ctx context.Context, cfg *config.Config, src config.Source, mnt string, log *slog.Logger) (*server, error) {
	s := &server{cfg: cfg, src: src, mnt: mnt, log: log}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if err := checkMountpoint(mnt); err != nil {
		return nil, err
	}
	var err error
	if s.be, err = openBackend(ctx, src, cfg); err != nil {
		return nil, describeBackendErr(src, err)
	}
	s.be = instrumentBackend(s, s.be)
	origin := s.be
	kind, _ := uring.ParseKind(cfg.IOEngine)
	if s.eng, err = uring.New(kind, uring.DefaultOptions()); err != nil {
		return nil, fmt.Errorf("--io-engine %s: %w", cfg.IOEngine, err)
	}
	so := cache.DefaultOptions()
	so.BlockSize = int64(cfg.BlockSize)
	so.MaxBytes = int64(cfg.CacheSize)
	so.MinFree = 0
	if cfg.CacheSize == 0 {
		so.MinFree = config.MinFreeFraction
	}
	so.Engine, so.Logger, so.Owner = s.eng, log, "mount "+mnt
	cachetools.PrivateFiles()
	if s.store, err = cache.Open(cfg.CacheDir, so); err != nil {
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
	po.InitialWindow = min(1<<20, int64(cfg.MaxReadahead))
	po.MaxWindow = int64(cfg.MaxReadahead)
	po.SmallObject = int64(cfg.SmallObject)
	po.Logger = log
	s.fetch = prefetch.New(s.be, prefetch.NewBudget(int64(cfg.MemoryLimit), int64(cfg.BlockSize)), po)

	fo := fs.DefaultOptions()
	fo.UID, fo.GID = ownerIDs(cfg)
	fo.FileMode, fo.DirMode = uint32(cfg.FileMode), uint32(cfg.DirMode)
	fo.TTL = time.Duration(cfg.MetadataTTL)
	fo.Passthrough = cfg.Passthrough != "off"
	fo.RenameDirLimit = cfg.Write.RenameDirLimit
	fo.DirPrefetch = cfg.DirPrefetch
	fo.Logger = log
	fo.Observe = opsObserver(s)
	s.fsys = fs.New(s.be.String(), src.Prefix, s.meta, s.store, s.fetch, fo)
	if err := startWrites(s); err != nil {
		return nil, err
	}
	mopts := fs.MountOptions{
		AllowOther: cfg.AllowOther, ReadOnly: cfg.ReadOnly, MaxRead: 1 << 20, MaxBackground: 128,
		ReadAheadKB: cfg.ReadAheadKB, ProbeDir: cfg.CacheDir, FsName: src.String(),
	}
	if s.mounted, err = fs.Mount(mnt, s.fsys, mopts); err != nil {
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
	ok = true
	return s, nil
}

// checkBackend proves the bucket exists and the credentials work. An
// unreachable endpoint is tolerated when the metadata never expires and
// this cache already holds the mount's root listing: the mount then serves
// what it has, offline.
func (s *server) checkBackend(ctx context.Context) error {
	c, ok := s.be.(backend.Checker)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := c.Check(cctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, backend.ErrUnavailable) && s.cfg.MetadataTTL == config.Indefinite {
		if hdr, found, _ := s.store.Index().GetDir(index.TagFor(s.be.String()), s.src.Prefix); found && hdr.Complete {
			s.log.Warn("backend unreachable; serving from the cache only (metadata-ttl indefinite)", "source", s.src.String(), "err", err)
			return nil
		}
	}
	return describeBackendErr(s.src, err)
}

// describeBackendErr names the likely cause of a failed backend check.
func describeBackendErr(src config.Source, err error) error {
	switch {
	case errors.Is(err, backend.ErrNoBucket):
		return fmt.Errorf("%s: the bucket does not exist (or the path is not a directory): %w", src, err)
	case errors.Is(err, backend.ErrAccessDenied):
		return fmt.Errorf("%s: access denied; check the credentials (AWS_* env, --profile, --key-file): %w", src, err)
	case errors.Is(err, backend.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: cannot reach the endpoint (check --endpoint-url and the network; to serve what the cache holds while offline, mount with --metadata-ttl indefinite): %w", src, err)
	}
	return fmt.Errorf("%s: %w", src, err)
}

func ownerIDs(cfg *config.Config) (uint32, uint32) {
	uid, gid := cfg.UID, cfg.GID
	if uid < 0 {
		uid = os.Getuid()
	}
	if gid < 0 {
		gid = os.Getgid()
	}
	return uint32(uid), uint32(gid)
}

// unmountNow undoes a mount that start cannot complete.
func unmountNow(s *server) {
	if err := s.mounted.Server.Unmount(); err != nil {
		if err := unix.Unmount(s.mnt, unix.MNT_DETACH); err != nil {
			s.log.Warn("undoing the mount", "mountpoint", s.mnt, "err", err)
		}
	}
	s.mounted.Server.Wait()
}

// close releases everything start opened, in reverse order.
func (s *server) close() {
	stopBackground(s)
	if s.ops != nil {
		stopOps(s)
	}
	if s.session != nil {
		s.session.stop()
	}
	if s.wb != nil {
		drainUploads(s)
		s.wb.Close()
	}
	if s.fetch != nil {
		s.fetch.Close()
	}
	if s.meta != nil {
		s.meta.Close()
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.log.Warn("closing the cache", "err", err)
		}
	}
	if s.eng != nil {
		s.eng.Close()
	}
	if s.shared != nil {
		closeShared(s)
	}
	if c, ok := s.be.(backend.Closer); ok {
		c.Close()
	}
}

// logSummary writes the one line that says how this mount is set up.
func (s *server) logSummary() {
	pt := "on"
	if !s.mounted.Passthrough {
		pt = "off (" + s.mounted.Why + ")"
	}
	limit := "keep 10% free"
	if s.cfg.CacheSize > 0 {
		limit = s.cfg.CacheSize.String()
	}
	s.log.Info("mounted", "source", s.src.String(), "mountpoint", s.mnt, "cache_dir", s.cfg.CacheDir,
		"cache_size", limit, "cache_used", config.Size(s.store.Used()).String(), "passthrough", pt,
		"io_engine", s.eng.Name(), "block_size", s.cfg.BlockSize.String(), "memory_limit", s.cfg.MemoryLimit.String(),
		"metadata_ttl", s.cfg.MetadataTTL.String(), "read_only", s.cfg.ReadOnly, "version", config.Version,
		"max_readahead", s.cfg.MaxReadahead.String(), "part_size", s.cfg.PartSize.String(), "max_fetches", s.cfg.MaxFetches, "allow_other", s.cfg.AllowOther, "metrics_addr", s.cfg.Ops.MetricsAddr, "config_file", s.cfg.Ops.ConfigFile)
}

// absMountpoint resolves the mountpoint the way mountinfo shows it.
func absMountpoint(p string) (string, error) {
	if strings.HasPrefix(p, "/dev/fd/") {
		return p, nil
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		a = r
	}
	return a, nil
}
