package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/internal/mount"
)

// cacheDirOrMount gives a cache command its cache: --cache-dir DIR, or
// the mountpoint of a live mount as its argument (strata cache stats
// /mnt/data), which says where its cache dir is. A user who looks at a
// mount knows its mountpoint; its cache dir may be a default under
// ~/.cache they never typed.
func cacheDirOrMount(cmd *cobra.Command, dir *string) {
	cmd.Args = cobra.MaximumNArgs(1)
	cmd.Flags().StringVar(dir, "cache-dir", "", "cache directory (or give the mountpoint of a live mount instead)")
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 1 && *dir != "":
			return fmt.Errorf("give a mountpoint or --cache-dir, not both")
		case len(args) == 1:
			d, err := cacheDirOfMount(args[0], cmd.CommandPath())
			*dir = d
			return err
		case *dir == "":
			return fmt.Errorf("which cache? give --cache-dir DIR, or the mountpoint of a live mount; usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// cacheDirOfMount is the cache dir of the Strata mount at mountpoint.
func cacheDirOfMount(mountpoint, verb string) (string, error) {
	e, err := mount.Find(mountpoint)
	if err != nil {
		if why := notALiveMount(mountpoint, func(mnt, _ string) string { return verb + " " + mnt }); why != nil {
			return "", fmt.Errorf("%w, or --cache-dir DIR", why)
		}
		return "", fmt.Errorf("%w: give the mountpoint of a live mount, or --cache-dir DIR", err)
	}
	if !mount.IsFUSE(e.FSType) {
		return "", fmt.Errorf("%s is not a strata mount (it is %s): give the mountpoint of a live mount, or --cache-dir DIR", mountpoint, e.FSType)
	}
	return controlDirOf(e.Mountpoint, verb)
}
