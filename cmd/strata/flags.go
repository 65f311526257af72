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
	fs.Var(&c.LookupFetch, "lookup-fetch", "a lookup not answered from a listing GETs the file's first SIZE bytes (at most a block) instead of a HEAD, and a file that small is cached by the lookup, so its open needs no request; 0 sends a HEAD")
	fs.Var(&c.RandomFill, "random-fill-max", "objects up to this size (and a quarter of the cache) that a reader reads at random are fetched whole in the background after 8 random misses; 0 turns it off")
	fs.IntVar(&c.MaxFetches, "max-fetches", c.MaxFetches, "concurrent GETs (demand reads may exceed it by half)")
	fs.IntVar(&c.ReadAheadKB, "read-ahead-kb", c.ReadAheadKB, "kernel readahead of the mount, in KiB (0: kernel default)")
	fs.StringVar(&c.Passthrough, "passthrough", c.Passthrough, "hand fully cached files to the kernel: auto, on (fail if unavailable) or off")
	fs.StringVar(&c.IOEngine, "io-engine", c.IOEngine, "cache file I/O: auto, uring or pread")
	fs.BoolVar(&c.ListPrefetch, "list-prefetch", c.ListPrefetch, "when a directory with subdirectories is listed, list their subtrees flat and in parallel in the background")
	fs.BoolVar(&c.DirPrefetch, "dir-prefetch", c.DirPrefetch, "when readers open a share of a directory's uncached small files (3%, at least 3), fetch its other small files in the background")

	bindWriteFlags(fs, &c.Write)
	bindSharedFlags(fs, &c.Shared)
	bindOpsFlags(fs, &c.Ops)
}

// bindWriteFlags defines the write path's flags.
func bindWriteFlags(fs *pflag.FlagSet, c *config.WriteConfig) {
	fs.StringVar(&c.Upload, "upload", c.Upload, "sync: close() returns once the object is in the bucket; async: once it is durable on the cache disk (uploaded in the background)")
	fs.IntVar(&c.UploadConcurrency, "upload-concurrency", c.UploadConcurrency, "files uploaded at once (each multipart upload also sends parts in parallel)")
	fs.DurationVar(&c.UploadDelay, "upload-delay", c.UploadDelay, "--upload async: start an upload once its file has been closed this long and nothing in its directory was written for as long (a directory renamed meanwhile moves staged files, not objects); 0: at once")
	fs.Var(&c.UploadPartSize, "upload-part-size", "multipart part size (0: automatic, growing with the file so 1 TB fits)")
	fs.IntVar(&c.RenameDirLimit, "rename-dir-limit", c.RenameDirLimit, "most objects a directory rename copies; beyond it rename returns EXDEV (mv then copies itself)")
}

// bindSharedFlags defines the shared cache tier's flags.
func bindSharedFlags(fs *pflag.FlagSet, c *config.SharedConfig) {
	fs.StringVar(&c.URL, "shared-cache", c.URL, "second cache tier shared by every mount pointing at it: s3://BUCKET[/PREFIX] "+
		"(an S3 Express One Zone directory bucket in the nodes' zone, or an in-cluster MinIO)")
	fs.StringVar(&c.EndpointURL, "shared-cache-endpoint-url", c.EndpointURL, "endpoint of the shared cache's store (default: AWS)")
	fs.StringVar(&c.Region, "shared-cache-region", c.Region, "region of the shared cache bucket (default: from the AWS config)")
	fs.StringVar(&c.Profile, "shared-cache-profile", c.Profile, "AWS shared-config profile for the shared cache (default: the standard credential chain)")
	fs.BoolVar(&c.ForcePathStyle, "shared-cache-force-path-style", c.ForcePathStyle, "path-style addressing for the shared cache (MinIO)")
	fs.BoolVar(&c.ReadOnly, "shared-cache-read-only", c.ReadOnly, "read the shared cache but never write to it")
	fs.Var(&c.GroupSize, "shared-cache-group-size", "bytes of whole cache blocks stored per shared object (at least one block)")
	fs.DurationVar(&c.Timeout, "shared-cache-timeout", c.Timeout, "bound on a shared cache request before the origin serves the read instead")
	fs.IntVar(&c.WriteConcurrency, "shared-cache-write-concurrency", c.WriteConcurrency, "background writes to the shared cache in flight")
	fs.StringVar(&c.KeyFile, "shared-cache-key-file", c.KeyFile, "file holding a secret (at least 16 bytes; the same on every node) that signs "+
		"the shared cache's entries: entries not signed with it are refused as forged")
	fs.Var(&c.WriteBuffer, "shared-cache-write-buffer", "memory for blocks waiting to be written to the shared cache; blocks that do not fit are not written")
}

// bindOpsFlags defines operational flags (metrics, warming, config file).
func bindOpsFlags(fs *pflag.FlagSet, c *config.OpsConfig) {
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (default: off)")
	fs.BoolVar(&c.ControlSocket, "control-socket", c.ControlSocket, "serve <cache-dir>/control.sock (owner only) so strata warm, strata cache and strata refresh work while mounted")
	fs.IntVar(&c.WarmConcurrency, "warm-concurrency", c.WarmConcurrency, "objects strata warm (and --warm-on-mount) hydrate at once")
	fs.IntVar(&c.History, "history", c.History, "finished mounts remembered for strata cache stats")
	fs.StringVar(&c.WarmOnMount, "warm-on-mount", c.WarmOnMount, "after mounting, hydrate this prefix of the mount into the cache in the background (\"/\" for everything); demand reads go first")
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "YAML file of settings (keys are these flag names; flags given here win)")
	fs.BoolVar(&c.PrintConfig, "print-config", c.PrintConfig, "print the effective configuration (secrets redacted) and exit")
}

// requireFlag marks flag name of cmd required. It fails only for a name
// cmd does not define: a typo here, so it panics.
func requireFlag(cmd *cobra.Command, name string) {
	if err := cmd.MarkFlagRequired(name); err != nil {
		panic(fmt.Sprintf("strata: %s: %v", cmd.Name(), err))
	}
}
