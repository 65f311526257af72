package mount

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
)

// Checks of where a mount goes that must happen before anything touches
// the directories: a cache dir the mount itself (or another FUSE mount)
// serves makes the daemon read its own cache through the kernel, and the
// kernel then waits on the daemon forever (threads in D state).

// Entry is one line of /proc/self/mountinfo.
type Entry struct {
	Dev        string // major:minor
	Mountpoint string
	FSType     string
	Source     string
}

// ReadMountinfo lists the process's mounts, in mountinfo's order.
func ReadMountinfo() []Entry {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []Entry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		e := Entry{Dev: f[2], Mountpoint: UnescapeMountinfo(f[4])}
		for i := 5; i < len(f); i++ {
			if f[i] == "-" && i+2 < len(f) {
				e.FSType, e.Source = f[i+1], UnescapeMountinfo(f[i+2])
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// Locate finds, in the mount table ms, the topmost mount whose mountpoint
// is abs (at) and the deepest mount enclosing abs strictly (in); either
// is the zero Entry when there is none. It compares paths only: it never
// touches abs, which may lie in a hung FUSE mount.
func Locate(abs string, ms []Entry) (at, in Entry) {
	for _, e := range ms {
		switch {
		case e.Mountpoint == abs:
			at = e
		case within(abs, e.Mountpoint) && len(e.Mountpoint) >= len(in.Mountpoint):
			in = e
		}
	}
	return at, in
}

// mountOf returns the mount holding path p (the last, i.e. topmost, mount
// whose mountpoint is p or an ancestor of it).
func mountOf(p string) (Entry, bool) {
	var best Entry
	found := false
	for _, e := range ReadMountinfo() {
		if within(p, e.Mountpoint) && (!found || len(e.Mountpoint) >= len(best.Mountpoint)) {
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
	if e, ok := mountOf(c); ok && IsFUSE(e.FSType) {
		what := "a FUSE filesystem (" + e.FSType + ")"
		if IsStrata(e) {
			what = "another Strata mount (" + e.Source + ")"
		}
		return fmt.Errorf("--cache-dir %s lies on %s mounted at %s: a cache must be on a local disk; choose a directory outside it", cacheDir, what, e.Mountpoint)
	}
	return nil
}

// checkSourceDir refuses a file:// source tangled with the mount: one
// holding the mountpoint shows the mount inside itself (the daemon walks
// its own mount, keeps it busy and can deadlock), one inside the
// mountpoint is hidden by the mount it feeds, and one holding the cache
// dir serves the mount's own cache files (and lets writes into them).
func checkSourceDir(src config.Source, cacheDir, mnt string) error {
	if src.Scheme != "file" {
		return nil
	}
	s := resolvePath(src.Path)
	if mnt != "" && !strings.HasPrefix(mnt, "/dev/fd/") {
		switch {
		case s == mnt:
			return fmt.Errorf("mountpoint %s is the source directory %s: the mount would hide the files it serves; mount it somewhere else", mnt, src.Path)
		case within(mnt, s):
			return fmt.Errorf("mountpoint %s is inside the source %s: the mount would show itself inside itself; choose a mountpoint outside the source", mnt, src.Path)
		case within(s, mnt):
			return fmt.Errorf("source %s is inside the mountpoint %s: the mount would hide the files it serves; choose a mountpoint outside the source", src.Path, mnt)
		}
	}
	if within(resolvePath(cacheDir), s) {
		return fmt.Errorf("--cache-dir %s is inside the source %s: the mount would serve its own cache files; choose a --cache-dir outside the source", cacheDir, src.Path)
	}
	return nil
}

// CheckEmpty refuses to mount over a directory that has entries, as
// mount(8) users expect: they would be hidden while mounted.
func CheckEmpty(mnt string) error {
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

// cacheHolder parses the cache lock's "pid N (mount /mnt/x)".
func cacheHolder(cacheDir string) (pid int, mnt string, ok bool) {
	h := cache.LockHolder(cacheDir)
	if h == "" {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(h, "pid %d", &pid); err != nil || pid <= 0 {
		return 0, "", false
	}
	if _, rest, found := strings.Cut(h, "(mount "); found {
		mnt = strings.TrimSuffix(rest, ")")
	}
	return pid, mnt, true
}

// CheckCacheFree runs before the new mount opens its log (which, in the
// cache dir, is the holder's log too). A cache dir held by a live mount is
// refused. One held by a mount that is already unmounted is a previous
// mount finishing its uploads: say so and wait for it to exit (waiting is
// always safe: its uploads complete and the new mount finds its cache).
func CheckCacheFree(cacheDir string, wait time.Duration) error {
	pid, holderMnt, ok := cacheHolder(cacheDir)
	if !ok || pid == os.Getpid() {
		return nil
	}
	s, _ := cachetools.ReadSession(cacheDir)
	// A holder without a mountpoint (warm, cache verify), with one still
	// mounted, or serving a /dev/fd mount (the Kubernetes sidecar) is live.
	if holderMnt == "" || strings.HasPrefix(holderMnt, "/dev/fd/") || IsMountpoint(holderMnt) {
		what := "pid " + strconv.Itoa(pid)
		if holderMnt != "" {
			what = fmt.Sprintf("the mount at %s (pid %d)", holderMnt, pid)
		}
		return fmt.Errorf("--cache-dir %s is in use by %s; each mount needs its own cache dir", cacheDir, what)
	}
	fmt.Fprintf(os.Stderr, "strata: a previous Strata mount of %s (pid %d, unmounted from %s) %s; waiting for it to exit (Ctrl-C stops waiting; its uploads go on)\n",
		cmp.Or(s.Source, cacheDir), pid, holderMnt, whyRunning(s.PendingUploads, holderMnt))
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if cache.LockHolder(cacheDir) == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("a previous Strata mount (pid %d) with --cache-dir %s %s; wait for it (see its log) or mount with another --cache-dir", pid, cacheDir, whyRunning(s.PendingUploads, holderMnt))
}

// whyRunning says what keeps an unmounted daemon running: its uploads, or,
// with none left, a file still open in it (`umount -l` detaches the mount
// from the tree, not the files open in it, and the daemon serves them
// until they are closed).
func whyRunning(pending int, mnt string) string {
	if pending > 0 {
		return fmt.Sprintf("is finishing %d uploads", pending)
	}
	return fmt.Sprintf("has no upload left but is still serving a file or directory open in it (after `umount -l`, a process that still has one open, or its working directory there: `ls -l /proc/*/fd /proc/*/cwd | grep %s` finds it)", mnt)
}

// RecoverDeadMount detaches a dead Strata mount at mnt (its daemon is
// gone: the kernel answers ENOTCONN). Nothing can be lost: no process
// serves it, and a lazy detach only removes the stale entry.
//
// statfs, not stat: the kernel answers stat of the root from its attribute
// cache for up to the mount's TTL (the "busy for 60 s" after a kill -9),
// while statfs always asks the daemon. A live daemon that does not answer
// within seconds is left alone (CheckMountpoint then says busy).
func RecoverDeadMount(mnt string) {
	e, err := Find(mnt)
	if err != nil || !IsStrata(e) {
		return
	}
	res := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		res <- unix.Statfs(mnt, &st)
	}()
	select {
	case err := <-res:
		if !errors.Is(err, unix.ENOTCONN) {
			return
		}
	case <-time.After(5 * time.Second):
		return
	}
	if err := Unmount(e, unix.MNT_DETACH); err == nil {
		fmt.Fprintf(os.Stderr, "strata: the previous mount at %s had died (transport endpoint is not connected); detached it\n", mnt)
	}
}

// absMountpoint resolves the mountpoint the way mountinfo shows it.
func absMountpoint(p string) (string, error) {
	if strings.HasPrefix(p, "/dev/fd/") {
		return p, nil
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		a = r
	}
	return a, nil
}

// Find locates p in mountinfo without touching p itself: a stat of a
// hung FUSE mountpoint would block, which is the case --force is for.
func Find(p string) (Entry, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return Entry{}, err
	}
	cands := []string{a}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(a)); err == nil {
		cands = append(cands, filepath.Join(dir, filepath.Base(a)))
	}
	ms := ReadMountinfo()
	for _, c := range cands {
		for i := len(ms) - 1; i >= 0; i-- { // the topmost mount there
			if ms[i].Mountpoint == c {
				return ms[i], nil
			}
		}
	}
	return Entry{}, fmt.Errorf("%s is not mounted", p)
}

// IsStrata reports whether e is a Strata mount (also one the CSI plugin
// made, or a bind mount of one).
func IsStrata(e Entry) bool { return e.FSType == "fuse.strata" }

// IsFUSE reports whether fstype (mountinfo's) is a FUSE filesystem.
func IsFUSE(fstype string) bool {
	return fstype == "fuse" || strings.HasPrefix(fstype, "fuse.") || strings.HasPrefix(fstype, "fuseblk")
}

// Prepare parses and validates everything that can be checked without the
// network, filling in defaults that depend on the source.
func Prepare(cfg *config.Config, source, mountpoint string) (config.Source, string, error) {
	src, err := config.ParseSource(source)
	if err != nil {
		return src, "", err
	}
	if err := cfg.Validate(); err != nil {
		return src, "", err
	}
	mnt, err := absMountpoint(mountpoint)
	if err != nil {
		return src, "", err
	}
	if err := ResolveCacheDir(cfg, src); err != nil {
		return src, "", err
	}
	if err := checkCacheDir(cfg.CacheDir, mnt); err != nil {
		return src, "", err
	}
	if err := checkSourceDir(src, cfg.CacheDir, mnt); err != nil {
		return src, "", err
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return src, "", cacheDirErr(cfg.CacheDir, err)
	}
	// An existing directory on a read-only disk would otherwise fail later,
	// as whatever is written there first (the log file of a background
	// mount), with a message that does not name --cache-dir.
	if err := unix.Access(cfg.CacheDir, unix.W_OK|unix.X_OK); err != nil {
		return src, "", cacheDirErr(cfg.CacheDir, &os.PathError{Op: "access", Path: cfg.CacheDir, Err: err})
	}
	return src, mnt, nil
}

// cacheDirErr says why a cache dir cannot be used.
func cacheDirErr(dir string, err error) error {
	if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return fmt.Errorf("--cache-dir %s is not writable (%w): the cache needs a directory on a writable local disk", dir, err)
	}
	return fmt.Errorf("--cache-dir %s: %w", dir, err)
}

// ResolveCacheDir makes cfg.CacheDir absolute, choosing the source's own
// directory under $XDG_CACHE_HOME/strata when none is set.
func ResolveCacheDir(cfg *config.Config, src config.Source) error {
	var err error
	if cfg.CacheDir == "" {
		if cfg.CacheDir, err = config.DefaultCacheDir(src, cfg.EndpointURL); err != nil {
			return err
		}
	}
	cfg.CacheDir, err = filepath.Abs(cfg.CacheDir)
	return err
}
