package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// fuseConnections is where the kernel's fusectl filesystem lists the live
// FUSE connections, each a directory named by the mount's device minor.
const fuseConnections = "/sys/fs/fuse/connections"

func umountCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "umount [--force] MOUNTPOINT",
		Short: "Unmount a Strata mount (--force: also one that hangs)",
		Long: `Unmount MOUNTPOINT. With --force, first abort the mount's FUSE connection
(/sys/fs/fuse/connections/N/abort), which fails every pending and future
request of that mount with ENOTCONN and frees processes stuck on it, then
detach the mount lazily: a hung mount is recovered without a reboot. The
daemon, if it is still alive, exits once it notices the connection is gone.`,
		Example: `  strata umount /mnt/data
  strata umount --force /mnt/data`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUmount(args[0], force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "abort the FUSE connection first, then detach lazily (for a hung or dead mount)")
	return cmd
}

// findMount locates p in mountinfo without touching p itself: a stat of a
// hung FUSE mountpoint would block, which is the case --force is for.
func findMount(p string) (mountEntry, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return mountEntry{}, err
	}
	cands := []string{a}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(a)); err == nil {
		cands = append(cands, filepath.Join(dir, filepath.Base(a)))
	}
	ms := readMountinfo()
	for _, c := range cands {
		for i := len(ms) - 1; i >= 0; i-- { // the topmost mount there
			if ms[i].mountpoint == c {
				return ms[i], nil
			}
		}
	}
	return mountEntry{}, fmt.Errorf("%s is not mounted", p)
}

func runUmount(p string, force bool) error {
	e, err := findMount(p)
	if err != nil {
		return err
	}
	if !force {
		if err := unix.Unmount(e.mountpoint, 0); err != nil {
			if errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("umount %s: files are still open there (see `fuser -vm %s`); close them, or detach it lazily with `umount -l %s`", e.mountpoint, e.mountpoint, e.mountpoint)
			}
			return fmt.Errorf("umount %s: %w", e.mountpoint, err)
		}
		return nil
	}
	if isFUSE(e.fstype) {
		if err := abortConnection(e); err != nil {
			return fmt.Errorf("umount --force %s: %w", e.mountpoint, err)
		}
	}
	if err := unix.Unmount(e.mountpoint, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("umount --force %s: %w", e.mountpoint, err)
	}
	return nil
}

func isFUSE(fstype string) bool {
	return fstype == "fuse" || strings.HasPrefix(fstype, "fuse.") || strings.HasPrefix(fstype, "fuseblk")
}

// abortConnection writes to the connection's abort file; the connection is
// named by the device minor of the mount (mountinfo's major:minor, with
// major 0 for FUSE). fusectl is mounted first if it is not.
func abortConnection(e mountEntry) error {
	_, minor, ok := strings.Cut(e.dev, ":")
	if !ok {
		return fmt.Errorf("unexpected device %q in mountinfo", e.dev)
	}
	abort := filepath.Join(fuseConnections, minor, "abort")
	if _, err := os.Stat(filepath.Join(fuseConnections, minor)); err != nil {
		if err := unix.Mount("fusectl", fuseConnections, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mounting fusectl on %s: %w", fuseConnections, err)
		}
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // the connection is already gone (the daemon died); detach only
		}
		return fmt.Errorf("aborting the FUSE connection (%s): %w", abort, err)
	}
	return nil
}
