package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
)

// bindMountFlags defines every mount flag on fs, bound to cfg (whose
// values are the defaults shown in --help).
func bindMountFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.StringVar(&c.CacheDir, "cache-dir", c.CacheDir, "cache directory (default: per-source dir under $XDG_CACHE_HOME/strata, mode 0700)")
	fs.Var(&c.CacheSize, "cache-size", "largest the cache may grow, e.g. 100GiB (default: keep 10% of the cache filesystem free)")
	fs.Var(&c.MetadataTTL, "metadata-ttl", "how long listings and lookups are trusted: a duration, 0, or indefinite")

	fs.StringVar(&c.EndpointURL, "endpoint-url", c.EndpointURL, "custom endpoint (MinIO, other S3-compatible stores, a GCS emulator)")
	fs.StringVar(&c.Region, "region", c.Region, "S3 region (default: from the AWS config, else us-east-1)")
	fs.StringVar(&c.Profile, "profile", c.Profile, "AWS shared-config profile")
	fs.BoolVar(&c.ForcePathStyle, "force-path-style", c.ForcePathStyle, "S3 path-style addressing (MinIO and most S3-compatible stores)")
	fs.BoolVar(&c.NoSignRequest, "no-sign-request", c.NoSignRequest, "S3: send unsigned requests (public buckets)")
	fs.StringVar(&c.KeyFile, "key-file", c.KeyFile, "GCS service-account key file (default: Application Default Credentials)")
	fs.BoolVar(&c.Anonymous, "anonymous", c.Anonymous, "GCS: no credentials (public buckets)")

	fs.BoolVar(&c.ReadOnly, "read-only", c.ReadOnly, "mount read-only")
	fs.BoolVar(&c.AllowOther, "allow-other", c.AllowOther, "let other users access the mount (needs user_allow_other in /etc/fuse.conf when not root)")
	fs.IntVar(&c.UID, "uid", c.UID, "owner of every file (default: the mounting user)")
	fs.IntVar(&c.GID, "gid", c.GID, "group of every file (default: the mounting user's group)")
	fs.Var(&c.FileMode, "file-mode", "permission bits of files")
	fs.Var(&c.DirMode, "dir-mode", "permission bits of directories")

	fs.BoolVarP(&c.Foreground, "foreground", "f", c.Foreground, "stay attached and log to stderr")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "auto (text on a terminal), text or json")
	fs.StringVar(&c.LogFile, "log-file", c.LogFile, "log file when running in the background (default: <cache-dir>/strata.log)")

	fs.Var(&c.BlockSize, "block-size", "cache block size (fixed per cache dir)")
	fs.Var(&c.MemoryLimit, "memory-limit", "memory for in-flight fetch buffers; prefetch shrinks under it, reads never fail")
	fs.Var(&c.MaxReadahead, "max-readahead", "largest sequential readahead window per open file")
	fs.Var(&c.PartSize, "part-size", "bytes per ranged GET when reading ahead")
	fs.Var(&c.SmallObject, "small-object", "objects up to this size are fetched whole, in one GET, when opened")
	fs.IntVar(&c.MaxFetches, "max-fetches", c.MaxFetches, "concurrent GETs (demand reads may exceed it by half)")
	fs.IntVar(&c.ReadAheadKB, "read-ahead-kb", c.ReadAheadKB, "kernel readahead of the mount, in KiB (0: kernel default)")
	fs.StringVar(&c.Passthrough, "passthrough", c.Passthrough, "hand fully cached files to the kernel: auto, on (fail if unavailable) or off")
	fs.StringVar(&c.IOEngine, "io-engine", c.IOEngine, "cache file I/O: auto, uring or pread")
	fs.BoolVar(&c.DirPrefetch, "dir-prefetch", c.DirPrefetch, "when readers open several uncached small files of a directory, fetch its other small files in the background")

	bindWriteFlags(fs, &c.Write)
	bindSharedFlags(fs, &c.Shared)
	bindOpsFlags(fs, &c.Ops)
}

// requireFlag marks flag name of cmd required. It fails only for a name
// cmd does not define: a typo here, so it panics.
func requireFlag(cmd *cobra.Command, name string) {
	if err := cmd.MarkFlagRequired(name); err != nil {
		panic(fmt.Sprintf("strata: %s: %v", cmd.Name(), err))
	}
}
