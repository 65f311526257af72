package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
)

func cacheVerifyCmd() *cobra.Command {
	var dir string
	var asJSON bool
	var workers int
	cmd := &cobra.Command{
		Use:   "verify [MOUNTPOINT | --cache-dir DIR]",
		Short: "Re-check the CRC32C of every cached block and drop the bad ones",
		Long: `Re-check the CRC32C of every cached block against the index and drop the
blocks that fail (they are fetched again on their next read). It exits 0 and
says how many blocks it dropped; a non-zero exit means it could not finish.

While a mount serves the directory the mount does the check: it covers every
block the mount has not already checked since it started (blocks it wrote or
read were checked then); for a check of every block, unmount first.`,
		Example: `  strata cache verify --cache-dir /nvme/strata`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			pp := newProgressPrinter(os.Stderr, "verify", 10*time.Second)
			show := func(p cachetools.VerifyProgress) {
				pp.update(progressState{Objects: p.Objects, DoneObjects: p.DoneObjects, Bytes: p.Bytes, DoneBytes: p.DoneBytes, Failed: p.BadObjects})
			}
			var res cachetools.VerifyProgress
			err := viaMountOr(ctx, dir, control.Request{Op: "verify"}, &res, func(raw json.RawMessage) {
				var p cachetools.VerifyProgress
				if json.Unmarshal(raw, &p) == nil {
					show(p)
				}
			}, func() error {
				store, closeFn, err := cachetools.OfflineStore(dir, "cache verify", 1<<62, true, newLogger(os.Stderr, "warn", "text"))
				if err != nil {
					return err
				}
				defer closeFn()
				res, err = cachetools.Verify(ctx, store, workers, show)
				return err
			})
			pp.done()
			if asJSON {
				err = errors.Join(err, printJSON(res))
			} else if res.Objects > 0 || err == nil {
				fmt.Printf("verified %d objects (%s): %d bad blocks dropped in %d objects\n", res.DoneObjects, sizeStr(res.DoneBytes), res.BadBlocks, res.BadObjects)
				for _, k := range res.Damaged {
					fmt.Printf("  dropped blocks of %s\n", k)
				}
			}
			return err
		},
	}
	cacheDirOrMount(cmd, &dir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&workers, "workers", config.Tools().VerifyWorkers, "objects checked at once (offline)")
	return cmd
}

func cacheGCCmd() *cobra.Command {
	var dir string
	var size config.Size
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gc [MOUNTPOINT | --cache-dir DIR] [--cache-size SIZE]",
		Short: "Apply the size limit now: evict least recently used objects",
		Long: `Evict least recently used objects until the cache is under 90% of its limit
(if it is above 95%), as a mount does in the background. Offline the limit is
--cache-size (default: keep 10% of the disk free); through a running mount it
is the mount's own limit.`,
		Example: `  strata cache gc --cache-dir /nvme/strata --cache-size 200GiB`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res cachetools.GCResult
			err := viaMountOr(context.Background(), dir, control.Request{Op: "gc"}, &res, nil, func() error {
				store, closeFn, err := cachetools.OfflineStore(dir, "cache gc", int64(size), false, newLogger(os.Stderr, "warn", "text"))
				if err != nil {
					return err
				}
				defer closeFn()
				res = cachetools.SettleEviction(store)
				return nil
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(res)
			}
			where := ""
			if res.Live {
				where = " (by the running mount)"
			}
			fmt.Printf("freed %s%s: the cache holds %s of %s allowed\n", sizeStr(res.FreedBytes), where, sizeStr(res.UsedBytes), sizeStr(res.LimitBytes))
			return nil
		},
	}
	cacheDirOrMount(cmd, &dir)
	cmd.Flags().Var(&size, "cache-size", "size limit to apply (offline; default: keep 10% of the disk free)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// viaMountOr runs req through the mount serving dir if there is one, else
// offline().
func viaMountOr(ctx context.Context, dir string, req control.Request, result any, onProgress func(json.RawMessage), offline func() error) error {
	conn, _, err := control.Owner(dir)
	if err != nil {
		return err
	}
	if conn == nil {
		return offline()
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	return conn.Call(req, onProgress, result)
}

// printJSON prints v, indented, on stdout.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

func cacheClearCmd() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "clear --cache-dir DIR",
		Short: "Empty a cache directory (not while it is mounted)",
		Long: `Remove every cached object, the index, the session and its history from the
cache directory. The directory itself and strata.log stay. It refuses while a
mount or another strata command uses the directory: a mounted cache cannot
be emptied under open files, so unmount first. It also refuses while written
files wait for upload, unless --force.`,
		Example: `  strata cache clear --cache-dir /nvme/strata`,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, b, err := cachetools.Clear(dir, force)
			if err != nil {
				return err
			}
			fmt.Printf("cleared %s: %d objects (%s) removed\n", dir, n, sizeStr(b))
			return nil
		},
	}
	cmd.Args = cobra.NoArgs // a live mount's cache is never cleared: no mountpoint form
	cmd.Flags().StringVar(&dir, "cache-dir", "", "cache directory")
	requireFlag(cmd, "cache-dir")
	cmd.Flags().BoolVar(&force, "force", false, "also discard written files not yet uploaded")
	return cmd
}
