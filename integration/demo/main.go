package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/stratafs/strata/integration/workload"
)

// Config is the demo's settings.
type Config struct {
	Files     int
	Dirs      int
	FileSize  int64
	Large     int
	LargeSize int64
	Procs     int
	// Backend is "s3" (MinIO) or "gcs" (fake-gcs-server).
	Backend string
	// Mounter is "strata" (the demo) or a peer, for comparison.
	Mounter string
	WorkDir string
	Keep    bool
	Verify  bool
	Seed    uint64
}

func parseFlags(args []string) (Config, error) {
	fs := flag.NewFlagSet("strata-demo", flag.ContinueOnError)
	c := Config{}
	fs.IntVar(&c.Files, "files", 3000, "number of ~128 KiB files")
	fs.IntVar(&c.Dirs, "dirs", 30, "class directories they are spread over")
	size := fs.String("file-size", "128KiB", "mean size of the small files (±25%)")
	fs.IntVar(&c.Large, "large", 3, "number of large files")
	large := fs.String("large-size", "64MiB", "size of each large file")
	fs.IntVar(&c.Procs, "procs", 4, "reader processes")
	fs.StringVar(&c.Backend, "backend", envOr("STRATA_DEMO_BACKEND", "s3"), "s3 (MinIO) or gcs (fake-gcs-server); env STRATA_DEMO_BACKEND")
	fs.StringVar(&c.Mounter, "mounter", "strata", "strata, or rclone or s3fs to run the same demo on a peer (s3 only)")
	fs.StringVar(&c.WorkDir, "workdir", "", "directory for data, server and cache (default: a new temporary directory)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory")
	fs.BoolVar(&c.Verify, "verify", true, "check the sha256 of every file read through the mount (an untimed pass)")
	fs.Uint64Var(&c.Seed, "seed", 1, "dataset and shuffle seed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	var err error
	if c.FileSize, err = parseSize(*size); err != nil {
		return c, fmt.Errorf("-file-size: %w", err)
	}
	if c.LargeSize, err = parseSize(*large); err != nil {
		return c, fmt.Errorf("-large-size: %w", err)
	}
	switch {
	case c.Backend != "s3" && c.Backend != "gcs":
		return c, fmt.Errorf("-backend must be s3 or gcs, not %q", c.Backend)
	case c.Mounter != "strata" && c.Mounter != "rclone" && c.Mounter != "s3fs":
		return c, fmt.Errorf("-mounter must be strata, rclone or s3fs, not %q", c.Mounter)
	case c.Mounter != "strata" && c.Backend != "s3":
		return c, fmt.Errorf("-mounter %s works with -backend s3 only", c.Mounter)
	case c.Files < 1 || c.Dirs < 1 || c.Procs < 1 || c.FileSize < 1 || c.Large < 0:
		return c, fmt.Errorf("-files, -dirs, -procs and -file-size must be positive")
	}
	return c, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func main() {
	workload.Main("strata-demo", parseFlags, func(ctx context.Context, cfg Config) error {
		_, err := run(ctx, cfg, os.Stdout)
		return err
	})
}
