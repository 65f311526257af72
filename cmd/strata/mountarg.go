package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/stratafs/strata/internal/mount"
)

// notALiveMount says why p, given to a command that wants the mountpoint of
// a live Strata mount (sync, uploads, refresh, cache stats), is not one,
// and what to type instead: a path inside a mount is the usual slip
// (`strata sync /mnt/data/ckpt`), and a bare "is not mounted" gave no
// hint that the mount is one level up. example makes the command to
// suggest from the mountpoint and the path inside it. It is nil when p is
// the mountpoint of a Strata mount: the caller's own error says more.
func notALiveMount(p string, example func(mnt, rel string) string) error {
	return explainNotAMount(p, example, mount.ReadMountinfo(), os.Stat)
}

// explainNotAMount is notALiveMount with the mount table and stat given.
// It matches paths as strings and stats p only when no FUSE mount encloses
// it: a stat of a hung FUSE mount would block.
func explainNotAMount(p string, example func(mnt, rel string) string, ms []mount.Entry, stat func(string) (os.FileInfo, error)) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	at, in := mount.Locate(abs, ms)
	if !mount.IsFUSE(at.FSType) && !mount.IsFUSE(in.FSType) {
		// Only now resolve symlinks: resolving a path inside a hung FUSE
		// mount would block.
		if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			abs = filepath.Join(dir, filepath.Base(abs))
			at, in = mount.Locate(abs, ms)
		}
	}
	switch {
	case mount.IsStrata(at):
		return nil
	case at.Mountpoint != "":
		return fmt.Errorf("%s is not a Strata mount (it is %s): give the mountpoint of a live Strata mount", p, at.FSType)
	}
	if mount.IsStrata(in) {
		rel, _ := filepath.Rel(in.Mountpoint, abs)
		return fmt.Errorf("%s is a path inside the Strata mount at %s, not its mountpoint: try `%s`", p, in.Mountpoint, example(in.Mountpoint, filepath.ToSlash(rel)))
	}
	if mount.IsFUSE(in.FSType) {
		return fmt.Errorf("%s is not mounted: give the mountpoint of a live Strata mount", p)
	}
	if _, err := stat(abs); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file or directory: give the mountpoint of a live Strata mount", p)
	}
	return fmt.Errorf("%s is not mounted: give the mountpoint of a live Strata mount", p)
}
