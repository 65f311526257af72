package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/mount"
)

func refreshCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "refresh MOUNTPOINT [PATH...]",
		Short: "Make a mount see objects as the bucket has them now (past --metadata-ttl)",
		Long: `Ask the mount on MOUNTPOINT to look PATH up in the bucket again now, whatever
--metadata-ttl says, and to drop the kernel's cached entry for it: the next
open sees the bucket's current version (a new inode), or ENOENT if it is gone.
A directory PATH is listed again on its next use, with everything under it.
With no PATH, the whole mount is.

This is the way out of --metadata-ttl indefinite when an object did change:
reads of the old version fail with ESTALE, and keep failing until the file is
refreshed and reopened. A PATH is relative to MOUNTPOINT, or an absolute path
under it. Files open on the old version keep it.

The mount does the work through its control socket: only root and the user
running the mount may refresh it.`,
		Example: `  strata refresh /mnt/data train/shard-0007.tar
  strata refresh /mnt/data /mnt/data/train/
  strata refresh /mnt/data`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := runRefresh(args[0], args[1:])
			if asJSON {
				if err := printJSON(res); err != nil {
					return err
				}
			} else {
				for _, r := range res {
					fmt.Println(describeRefresh(r))
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// refreshPaths turns the command line's paths into paths relative to the
// mount's root.
func refreshPaths(mountpoint string, args []string) ([]string, error) {
	var rels []string
	for _, a := range args {
		p := a
		if filepath.IsAbs(a) {
			r, err := filepath.Rel(mountpoint, filepath.Clean(a))
			if err != nil || r == ".." || strings.HasPrefix(r, "../") {
				return nil, fmt.Errorf("%s is not under the mountpoint %s", a, mountpoint)
			}
			p = r
		}
		p = filepath.ToSlash(filepath.Clean(p))
		if p == ".." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("%s is outside the mount (a PATH is relative to MOUNTPOINT)", a)
		}
		if p == "." {
			p = ""
		}
		rels = append(rels, p)
	}
	if len(rels) == 0 {
		rels = []string{""}
	}
	return rels, nil
}

// runRefresh finds the mount's control socket through the mountpoint and
// asks it to refresh the paths.
func runRefresh(mountpoint string, args []string) ([]fs.RefreshResult, error) {
	e, err := mount.Find(mountpoint)
	if err != nil {
		if why := notALiveMount(mountpoint, func(mnt, rel string) string { return "strata refresh " + mnt + " " + rel }); why != nil {
			return nil, why
		}
		return nil, err
	}
	if !mount.IsFUSE(e.FSType) {
		return nil, fmt.Errorf("%s is not a strata mount (it is %s)", e.Mountpoint, e.FSType)
	}
	rels, err := refreshPaths(e.Mountpoint, args)
	if err != nil {
		return nil, err
	}
	dir, err := controlDirOf(e.Mountpoint, "refresh")
	if err != nil {
		return nil, err
	}
	conn, err := control.Dial(dir)
	if err != nil {
		return nil, fmt.Errorf("refresh %s: the mount's control socket in %s does not answer (%v); is the mount still running?", e.Mountpoint, dir, err)
	}
	defer conn.Close()
	var out control.RefreshReply
	if err := conn.Call(control.Request{Op: "refresh", Paths: rels}, nil, &out); err != nil {
		return out.Results, fmt.Errorf("refresh %s: %w", e.Mountpoint, err)
	}
	return out.Results, nil
}

// controlDirOf asks the mount where its control socket is (its cache
// dir), for the command verb (refresh, cache stats...).
func controlDirOf(mountpoint, verb string) (string, error) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getxattr(mountpoint, fs.XattrControl, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENODATA):
			if verb != "refresh" {
				return "", fmt.Errorf("%s serves no control socket (it was mounted with --control-socket=false): name its cache with --cache-dir", mountpoint)
			}
			return "", fmt.Errorf("%s serves no control socket (it was mounted with --control-socket=false, or by a Strata without refresh): remount it to refresh, or wait for --metadata-ttl", mountpoint)
		case errors.Is(err, unix.ENOTSUP):
			return "", fmt.Errorf("%s is not a strata mount", mountpoint)
		case errors.Is(err, unix.EACCES):
			return "", fmt.Errorf("%s %s: only root and the user running the mount may %s it", verb, mountpoint, verb)
		case err != nil:
			return "", fmt.Errorf("%s %s: %w", verb, mountpoint, err)
		}
		return string(buf[:n]), nil
	}
}

// describeRefresh is one line of the command's output.
func describeRefresh(r fs.RefreshResult) string {
	name := "/" + r.Path
	switch r.State {
	case "all":
		return "refreshed the whole mount: listings and lookups will be fetched again"
	case "gone":
		return name + ": not in the bucket (gone from the mount)"
	case "directory":
		return name + ": directory, will be listed again"
	case "local":
		return name + ": written here and not uploaded yet; the local copy stays until its upload lands"
	}
	switch r.Was {
	case "":
		return fmt.Sprintf("%s: %s, version %s", name, sizeStr(r.Size), r.Version)
	case r.Version:
		return fmt.Sprintf("%s: unchanged (%s, version %s)", name, sizeStr(r.Size), r.Version)
	}
	return fmt.Sprintf("%s: changed in the bucket: now %s, version %s (was %s); reopen it", name, sizeStr(r.Size), r.Version, r.Was)
}
