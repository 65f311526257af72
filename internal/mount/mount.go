package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/prefetch"
)

// Mount is one running mount (or, from Open, the same stack without
// FUSE) and everything it owns, closed in reverse.
type Mount struct {
	cfg      *config.Config
	src      config.Source
	mnt      string
	log      *slog.Logger
	be       backend.Backend
	eng      uring.Engine
	store    *cache.Store
	meta     *meta.Cache
	fetch    *prefetch.Fetcher
	fsys     *fs.FS
	mounted  *fs.Mounted
	session  *sessionWriter
	wb       *writeback.Manager
	shared   *sharedState // shared.go
	ops      *opsState    // ops.go
	stopBg   func()       // background.go
	warnings []string     // warnings.go: said to the user once mounted
	offline  bool         // mounted with the backend unreachable (checkBackend)
}

// checkBackend proves the bucket exists and the credentials work. An
// unreachable endpoint is tolerated when the metadata never expires and
// this cache already holds the mount's root listing: the mount then serves
// what it has, offline.
func (s *Mount) checkBackend(ctx context.Context) error {
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
	if errors.Is(err, backend.ErrUnavailable) && s.cfg.MetadataTTL == config.Indefinite && os.Getenv(config.OfflineStartEnv) == "never" {
		return fmt.Errorf("%w (not served offline: these credentials never passed the backend's check on this shared cache)",
			describeBackendErr(s.src, err))
	}
	if errors.Is(err, backend.ErrUnavailable) && s.cfg.MetadataTTL == config.Indefinite {
		if hdr, found, _ := s.store.Index().GetDir(index.TagFor(s.be.String()), s.src.Prefix); found && hdr.Complete {
			s.log.Warn("backend unreachable; serving from the cache only (metadata-ttl indefinite)", "source", s.src.String(), "err", err)
			s.offline = true
			return nil
		}
	}
	return describeBackendErr(s.src, err)
}

// describeBackendErr names the likely cause of a failed backend check.
// A backend that explained its error (backend.Explained: S3 names the
// bucket, endpoint, region and credentials it used) is not explained
// again; only what the mount itself knows is added (the offline mode).
func describeBackendErr(src config.Source, err error) error {
	var explained *backend.Explained
	known := errors.As(err, &explained)
	switch {
	case errors.Is(err, backend.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		if known {
			return fmt.Errorf("%s: %w (to serve what the cache holds while offline, mount with --metadata-ttl indefinite)", src, err)
		}
		return fmt.Errorf("%s: cannot reach the endpoint (check --endpoint-url and the network; to serve what the cache holds while offline, mount with --metadata-ttl indefinite): %w", src, err)
	case known:
		return fmt.Errorf("%s: %w", src, err)
	case errors.Is(err, backend.ErrNoBucket):
		return fmt.Errorf("%s: the bucket does not exist: %w", src, err)
	case errors.Is(err, backend.ErrAccessDenied):
		return fmt.Errorf("%s: access denied; check the credentials (%s): %w", src, credentialHint(src), err)
	}
	return fmt.Errorf("%s: %w", src, err)
}

// credentialHint names where a source's backend takes its credentials.
func credentialHint(src config.Source) string {
	if src.Scheme == "gs" {
		return "GOOGLE_APPLICATION_CREDENTIALS, --key-file, --anonymous"
	}
	return "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, --profile, --no-sign-request"
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
func unmountNow(s *Mount) {
	if err := s.mounted.Server.Unmount(); err != nil {
		if err := unix.Unmount(s.mnt, unix.MNT_DETACH); err != nil {
			s.log.Warn("undoing the mount", "mountpoint", s.mnt, "err", err)
		}
	}
	s.mounted.Server.Wait()
}

// Close releases everything Start or Open opened, in reverse order.
func (s *Mount) Close() {
	stopBackground(s) // first: it registers backing files on the mount
	if s.mounted != nil {
		s.mounted.Close()
	}
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

// LogSummary writes the one line that says how this mount is set up.
func (s *Mount) LogSummary() {
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

// Unmount detaches the mount; if files are still open it detaches lazily,
// so the kernel finishes with them and the process exits once they close.
func (s *Mount) Unmount() {
	if err := s.mounted.Server.Unmount(); err == nil {
		return
	}
	time.Sleep(200 * time.Millisecond)
	if err := s.mounted.Server.Unmount(); err == nil {
		return
	}
	if err := unix.Unmount(s.mnt, unix.MNT_DETACH); err != nil {
		s.log.Warn("lazy unmount failed", "mountpoint", s.mnt, "err", err)
	}
}

// Wait returns once the kernel has unmounted the filesystem (umount, or
// Unmount); Close then releases the rest.
func (s *Mount) Wait() { s.mounted.Server.Wait() }

// Mountpoint is where s is mounted ("" for a mount from Open).
func (s *Mount) Mountpoint() string { return s.mnt }
