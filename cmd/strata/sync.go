package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/config"
)

func syncCmd() *cobra.Command {
	var asJSON bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "sync MOUNTPOINT",
		Short: "Wait until every file written to a mount is in the bucket",
		Long: `Wait for the uploads of every file closed so far on MOUNTPOINT (useful with
--upload=async), then report. Exits non-zero if an upload failed for good; the
failed file's data is kept in the cache directory and the message says where.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := waitSyncSaying(args[0], every)
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(sum); err != nil {
					return err
				}
			} else {
				for _, f := range sum.Failed {
					if f.Staging == "" { // a take-down: no data of the user's
						fmt.Printf("failed: %s: %s\n", f.Key, f.Error)
						continue
					}
					fmt.Printf("failed: %s: %s (data kept in %s)\n", f.Key, f.Error, f.Staging)
				}
				fmt.Printf("%d uploads pending, %d failed\n", sum.Pending, len(sum.Failed))
			}
			if len(sum.Failed) > 0 {
				return fmt.Errorf("%d uploads failed", len(sum.Failed))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&every, "progress-every", config.Tools().SyncProgressEvery, "while waiting, say every this often which uploads are pending (0: never)")
	return cmd
}

// waitSyncSaying is waitSync that says, on stderr every period, which
// uploads it is still waiting for and why, instead of hanging silently.
func waitSyncSaying(mountpoint string, every time.Duration) (writeback.Summary, error) {
	type result struct {
		sum writeback.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := waitSync(mountpoint)
		done <- result{sum, err}
	}()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case r := <-done:
			return r.sum, r.err
		case <-tick:
			us, err := listUploads(mountpoint)
			if err != nil {
				continue
			}
			var waiting []string
			for _, u := range us {
				if u.State == writeback.StateFailed || u.State == writeback.StateNotUpload || u.State == writeback.StateHeld {
					continue
				}
				w := u.Key + " (" + u.State
				if u.Error != "" {
					w += ": " + u.Error
				}
				waiting = append(waiting, w+")")
			}
			if len(waiting) > 0 {
				fmt.Fprintf(os.Stderr, "waiting for %d uploads: %s\n", len(waiting), strings.Join(waiting, ", "))
			}
		}
	}
}

// waitSync asks the mount, through an extended attribute of its root, to
// wait for its uploads and report.
func waitSync(mountpoint string) (writeback.Summary, error) {
	var sum writeback.Summary
	buf := make([]byte, 1<<20)
	for {
		n, err := unix.Getxattr(mountpoint, fs.XattrSync, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOENT) {
			if why := notALiveMount(mountpoint, func(mnt, _ string) string { return "strata sync " + mnt }); why != nil {
				return sum, why
			}
			return sum, fmt.Errorf("%s is not a strata mount", mountpoint)
		}
		if errors.Is(err, unix.EACCES) {
			return sum, fmt.Errorf("sync %s: only root, the user running the mount and the owner of its files (--uid) may sync it", mountpoint)
		}
		if err != nil {
			return sum, fmt.Errorf("sync %s: %w", mountpoint, err)
		}
		if err := json.Unmarshal(buf[:n], &sum); err != nil {
			return sum, fmt.Errorf("sync %s: unexpected answer: %w", mountpoint, err)
		}
		return sum, nil
	}
}
