package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/internal/mount"
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

func runUmount(p string, force bool) error {
	e, err := mount.Find(p)
	if err != nil || !mount.IsStrata(e) {
		// Another filesystem (a typo, a parent directory, someone's sshfs)
		// is refused, never unmounted or aborted.
		if why := notALiveMount(p, func(mnt, _ string) string { return "strata umount " + mnt }); why != nil {
			return why
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s is not a Strata mount (it is %s)", p, e.FSType)
	}
	if !force {
		if err := mount.Unmount(e, 0); err != nil {
			if errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("umount %s: files are still open there (see `fuser -vm %s`); close them, or detach it lazily with `umount -l %s`", e.Mountpoint, e.Mountpoint, e.Mountpoint)
			}
			return fmt.Errorf("umount %s: %w", e.Mountpoint, err)
		}
		return nil
	}
	if mount.IsFUSE(e.FSType) {
		if err := abortConnection(e); err != nil {
			if os.Geteuid() == 0 || !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("umount --force %s: %w", e.Mountpoint, err)
			}
			// A user may abort their own connection only where fusectl
			// is mounted (systemd mounts it); the lazy detach still works.
			fmt.Fprintf(os.Stderr, "strata: %s's FUSE connection could not be aborted (%v); detaching it lazily: a process stuck on it is freed once the mount's daemon exits (kill it if it hangs)\n", e.Mountpoint, err)
		}
	}
	if err := mount.Unmount(e, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("umount --force %s: %w", e.Mountpoint, err)
	}
	return nil
}

// abortConnection writes to the connection's abort file; the connection is
// named by the device minor of the mount (mountinfo's major:minor, with
// major 0 for FUSE). fusectl is mounted first if it is not.
func abortConnection(e mount.Entry) error {
	_, minor, ok := strings.Cut(e.Dev, ":")
	if !ok {
		return fmt.Errorf("unexpected device %q in mountinfo", e.Dev)
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
