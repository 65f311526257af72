package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/gclimit"
	"github.com/stratafs/strata/internal/mount"
)

func mountCmd() *cobra.Command {
	cfg := config.Defaults()
	var allowNonempty bool
	cmd := &cobra.Command{
		Use:   "mount [flags] SOURCE MOUNTPOINT",
		Short: "Mount a bucket or directory",
		Long: `Mount SOURCE at MOUNTPOINT. SOURCE is s3://bucket[/prefix], gs://bucket[/prefix]
or file:///path. The command returns once the mount is ready and keeps serving in
the background (--foreground stays attached). Unmount with: umount MOUNTPOINT`,
		Example: `  strata mount s3://datasets/imagenet /mnt/data --cache-dir /nvme/strata
  strata mount s3://bucket /mnt/b --endpoint-url http://127.0.0.1:9000 --force-path-style
  strata mount gs://bucket/train ~/data --metadata-ttl indefinite`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMount(&cfg, args[0], args[1], allowNonempty)
		},
	}
	bindMountFlags(cmd.Flags(), &cfg)
	// Only on mount (not warm or the config file): it is about the
	// mountpoint, not the cache. mount.strata maps -o nonempty to it.
	cmd.Flags().BoolVar(&allowNonempty, "allow-nonempty", false, "mount over a directory that is not empty (its files are hidden while mounted)")
	return withConfig(cmd, func(args []string) error {
		if len(args) > 0 {
			if _, err := config.ParseSource(args[0]); err != nil {
				return err
			}
		}
		return cfg.Validate()
	})
}

func runMount(cfg *config.Config, source, mountpoint string, allowNonempty bool) (err error) {
	// A mount refused before it is ready removes the cache dir it created
	// (with its parents): bad input changes nothing on the disk.
	if s, perr := config.ParseSource(source); perr == nil && mount.ResolveCacheDir(cfg, s) == nil {
		made := mount.PlanDirs(cfg.CacheDir)
		defer func() {
			if err != nil {
				made.Undo()
			}
		}()
	}
	src, mnt, err := mount.Prepare(cfg, source, mountpoint)
	if err != nil {
		return err
	}
	mount.RecoverDeadMount(mnt)
	if err := mount.CheckMountpoint(mnt); err != nil {
		return err
	}
	if err := mount.CheckFUSE(mnt, cfg.AllowOther); err != nil {
		return err
	}
	if !allowNonempty {
		if err := mount.CheckEmpty(mnt); err != nil {
			return err
		}
	}
	if !cfg.Foreground {
		if err := mount.CheckCacheFree(cfg.CacheDir, 5*time.Minute); err != nil {
			return err // before opening the log: it may be the other mount's
		}
		logFile := cfg.LogFile
		if logFile == "" {
			logFile = filepath.Join(cfg.CacheDir, "strata.log")
		}
		return daemonize(os.Args[1:], logFile)
	}

	log := newLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	startDebug(log)
	ready := readyPipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if os.Getenv("GOMEMLIMIT") == "" { // the user's own setting wins
		gclimit.Keep(ctx, goMemoryLimit(cfg), time.Second)
	}
	srv, err := mount.Start(ctx, mount.Options{Config: cfg, Source: src, Mountpoint: mnt, Logger: log})
	if err != nil {
		report(ready, err)
		return err
	}
	reportWarning(ready, srv.Warning()) // with --foreground the log said it
	report(ready, nil)
	srv.LogSummary()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			log.Info("unmounted; flushing the cache index", "mountpoint", mnt)
			srv.Close()
			return nil
		case sig := <-sigs:
			log.Info("signal received; unmounting", "signal", sig.String())
			if strings.HasPrefix(mnt, "/dev/fd/") {
				srv.Close()
				return nil
			}
			srv.Unmount()
		}
	}
}

// goMemoryLimit is the Go runtime's soft memory limit for a mount: the
// fetch buffers (--memory-limit) plus what a mount holds besides them,
// go-fuse's request buffers (MaxBackground and synchronous reads of up to
// MaxRead each, about 192 MiB) and the index (about 64 MiB), with slack.
// Without it the heap grows to twice what is live between collections:
// 64 readers at --memory-limit 128MiB peaked at 659 MiB of anonymous RSS
// (make soak); with it, 341 MiB at the same throughput. It is the floor:
// the limit rises above it with the live heap (the files the kernel
// knows), see gclimit.
func goMemoryLimit(cfg *config.Config) int64 { return int64(cfg.MemoryLimit) + 320<<20 }
