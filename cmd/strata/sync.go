package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/fs"
)

func syncCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sync MOUNTPOINT",
		Short: "Wait until every file written to a mount is in the bucket",
		Long: `Wait for the uploads of every file closed so far on MOUNTPOINT (useful with
--upload=async), then report. Exits non-zero if an upload failed for good; the
failed file's data is kept in the cache directory and the message says where.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := waitSync(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(sum); err != nil {
					return err
				}
			} else {
				for _, f := range sum.Failed {
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
	return cmd
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
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
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
