package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Checks of where a mount goes that must happen before anything touches
// the directories: a cache dir the mount itself (or another FUSE mount)
// serves makes the daemon read its own cache through the kernel, and the
// kernel then waits on the daemon forever (threads in D state).

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	dev        string // major:minor
	mountpoint string
	fstype     string
	source     string
}

func readMountinfo() []mountEntry {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		e := mountEntry{dev: f[2], mountpoint: unescapeMountinfo(f[4])}
		for i := 5; i < len(f); i++ {
			if f[i] == "-" && i+2 < len(f) {
				e.fstype, e.source = f[i+1], unescapeMountinfo(f[i+2])
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// mountOf returns the mount holding path p (the last, i.e. topmost, mount
// whose mountpoint is p or an ancestor of it).
func mountOf(p string) (mountEntry, bool) {
	var best mountEntry
	found := false
	for _, e := range readMountinfo() {
		if within(p, e.mountpoint) && (!found || len(e.mountpoint) >= len(best.mountpoint)) {
			best, found = e, true
		}
	}
	return best, found
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// resolvePath resolves the symlinks of p's longest existing ancestor, so a
// cache dir not created yet still resolves the way it will. It does not
// stat p itself when an ancestor is a dead FUSE mount (that fails fast
// with ENOTCONN) but it would block on a hung one; the checks run before
// anything is mounted by this process.
func resolvePath(p string) string {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// checkCacheDir refuses a cache dir the mount would serve itself, and one
// on a FUSE filesystem (another Strata mount, or any FUSE daemon): the
// cache needs a local disk, and a cache read through FUSE can deadlock.
func checkCacheDir(cacheDir, mnt string) error {
	if strings.HasPrefix(mnt, "/dev/fd/") {
		mnt = ""
	}
	c := resolvePath(cacheDir)
	if mnt != "" && within(c, mnt) {
		if c == mnt {
			return fmt.Errorf("--cache-dir %s is the mountpoint itself: the mount would read its own cache and hang; choose a directory outside %s", cacheDir, mnt)
		}
		return fmt.Errorf("--cache-dir %s is inside the mountpoint %s: the mount would hide and read its own cache; choose a directory outside it", cacheDir, mnt)
	}
	if e, ok := mountOf(c); ok && isFUSE(e.fstype) {
		what := "a FUSE filesystem (" + e.fstype + ")"
		if e.fstype == "fuse.strata" {
			what = "another Strata mount (" + e.source + ")"
		}
		return fmt.Errorf("--cache-dir %s lies on %s mounted at %s: a cache must be on a local disk; choose a directory outside it", cacheDir, what, e.mountpoint)
	}
	return nil
}

// checkEmpty refuses to mount over a directory that has entries, as
// mount(8) users expect: they would be hidden while mounted.
func checkEmpty(mnt string) error {
	if strings.HasPrefix(mnt, "/dev/fd/") {
		return nil
	}
	d, err := os.Open(mnt)
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", mnt, err)
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err == nil {
		return fmt.Errorf("mountpoint %s is not empty (its files would be hidden while mounted); use an empty directory or --allow-nonempty (-o nonempty)", mnt)
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("mountpoint %s: %w", mnt, err)
	}
	return nil
}

// checkCacheFree refuses a cache dir a live mount holds, before the new
// mount opens (and appends to) that mount's log file. The mount itself
// checks again under the cache lock; this only gives the early answer.
func checkCacheFree(cacheDir string) error {
	s, ok := readSession(cacheDir)
	if !ok || !s.Running || s.PID <= 0 || s.PID == os.Getpid() || unix.Kill(s.PID, 0) != nil {
		return nil
	}
	return fmt.Errorf("--cache-dir %s is in use by the mount of %s at %s (pid %d); each mount needs its own cache dir", cacheDir, s.Source, s.Mountpoint, s.PID)
}
