package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// modelRun plays one random sequence of POSIX calls on two trees at once,
// a directory on local disk (the model) and a directory in the mount, and
// reports the first call whose result differs: the errno, the bytes read,
// a size, a listing. The universe is small (three directories, four file
// names each) so that calls keep meeting each other: a rename over a file
// still open, a write after its name went, an unlink of a file being
// written, a directory renamed with files open in it.
type modelRun struct {
	rng   *rand.Rand
	local string
	mnt   string
	fds   []fdPair
	log   []string
	drop  func()
	// strata runs a strata command on the mount (sync, uploads --retry):
	// it has no local disk counterpart, and the calls that follow must
	// still give what local disk gives.
	strata func(args ...string) error
	// restart unmounts (or kills) the mount and mounts it again on the
	// same cache dir; it returns the run's root in the new mount.
	restart func(kill bool) (string, error)
	// more: the calls added after the first runs (child writes,
	// truncate by path, fsync of a directory, restarts) are played too.
	// Off, a seed plays the calls it played before them.
	more   bool
	dataID int
	fdID   int
}

type fdPair struct {
	id         int
	local, mnt int
	flags      int
	path       string
}

var (
	modelDirs  = []string{"", "a", "b", "a/c"}
	modelFiles = []string{"f0", "f1", "f2", "f3"}
)

func (r *modelRun) pick(list []string) string { return list[r.rng.IntN(len(list))] }

func (r *modelRun) anyPath() string {
	d := r.pick(modelDirs)
	if r.rng.IntN(6) == 0 {
		return d
	}
	return filepath.Join(d, r.pick(modelFiles))
}

func (r *modelRun) filePath() string { return filepath.Join(r.pick(modelDirs), r.pick(modelFiles)) }

func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// data returns n bytes no other call of this run writes.
func (r *modelRun) data(n int) []byte {
	r.dataID++
	b := make([]byte, n)
	s := fmt.Sprintf("<%d>", r.dataID)
	for i := range b {
		b[i] = s[i%len(s)]
	}
	return b
}

// both plays f on local disk and on the mount, and describes how their
// results differ ("" if they do not).
func (r *modelRun) both(what string, f func(root string) (string, error)) string {
	lo, le := f(r.local)
	mo, me := f(r.mnt)
	r.log = append(r.log, fmt.Sprintf("%s -> %v %q", what, errnoOf(le), trunc(lo)))
	if errnoOf(le) != errnoOf(me) {
		return fmt.Sprintf("%s: local disk %v, mount %v", what, errnoOf(le), errnoOf(me))
	}
	if lo != mo {
		return fmt.Sprintf("%s: local disk %q, mount %q", what, trunc(lo), trunc(mo))
	}
	return ""
}

// step plays one call; it returns a description of a difference, or "".
func (r *modelRun) step() string {
	both := r.both
	switch op := r.rng.IntN(100); {
	case op < 14: // open
		p := r.filePath()
		flags := []int{
			unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC,
			unix.O_RDWR | unix.O_CREAT,
			unix.O_WRONLY | unix.O_APPEND | unix.O_CREAT,
			unix.O_RDONLY,
			unix.O_RDWR,
			unix.O_RDWR | unix.O_CREAT | unix.O_EXCL,
		}[r.rng.IntN(6)]
		what := fmt.Sprintf("open(%s, %#o)", p, flags)
		lfd, le := unix.Open(filepath.Join(r.local, p), flags|unix.O_CLOEXEC, 0o644)
		mfd, me := unix.Open(filepath.Join(r.mnt, p), flags|unix.O_CLOEXEC, 0o644)
		r.log = append(r.log, fmt.Sprintf("%s -> %v (fd %d)", what, errnoOf(le), r.fdID+1))
		if le == nil {
			if me == nil {
				r.fdID++
				r.fds = append(r.fds, fdPair{r.fdID, lfd, mfd, flags, p})
				return ""
			}
			unix.Close(lfd)
		} else if me == nil {
			unix.Close(mfd)
		}
		if errnoOf(le) != errnoOf(me) {
			return fmt.Sprintf("%s: local disk %v, mount %v", what, errnoOf(le), errnoOf(me))
		}
	case op < 36 && len(r.fds) > 0: // write
		i := r.rng.IntN(len(r.fds))
		fd := r.fds[i]
		b := r.data(1 + r.rng.IntN(70000))
		off := r.offset(150000)
		if r.more && r.rng.IntN(4) == 0 {
			return r.childWrite(fd, b, off)
		}
		what := fmt.Sprintf("pwrite(fd %d %s, %d bytes at %d)", fd.id, fd.path, len(b), off)
		return both(what, func(root string) (string, error) {
			if fd.flags&unix.O_APPEND != 0 {
				n, err := unix.Write(fd.of(root == r.local), b)
				return fmt.Sprint(n), err
			}
			n, err := unix.Pwrite(fd.of(root == r.local), b, off)
			return fmt.Sprint(n), err
		})
	case op < 46 && len(r.fds) > 0: // read through a descriptor
		i := r.rng.IntN(len(r.fds))
		fd := r.fds[i]
		off := r.offset(200000)
		n := 1 + r.rng.IntN(100000)
		what := fmt.Sprintf("pread(fd %d %s, %d at %d)", fd.id, fd.path, n, off)
		return both(what, func(root string) (string, error) {
			b := make([]byte, n)
			got, err := unix.Pread(fd.of(root == r.local), b, off)
			if fd.flags&(unix.O_WRONLY|unix.O_RDWR) == 0 {
				// A descriptor only for reading, opened before another
				// one wrote, may keep the version it opened (README:
				// opening for writing a file another process holds open
				// through passthrough): its errno is compared, not its
				// bytes.
				return "", err
			}
			return digest(b[:max(got, 0)]), err
		})
	case op < 56 && len(r.fds) > 0: // close
		i := r.rng.IntN(len(r.fds))
		fd := r.fds[i]
		r.fds = slices.Delete(r.fds, i, i+1)
		return both(fmt.Sprintf("close(fd %d %s)", fd.id, fd.path), func(root string) (string, error) {
			return "", unix.Close(fd.of(root == r.local))
		})
	case op < 59 && len(r.fds) > 0: // ftruncate
		i := r.rng.IntN(len(r.fds))
		fd := r.fds[i]
		size := r.offset(120000)
		return both(fmt.Sprintf("ftruncate(fd %d %s, %d)", fd.id, fd.path, size), func(root string) (string, error) {
			return "", unix.Ftruncate(fd.of(root == r.local), size)
		})
	case op < 61 && len(r.fds) > 0: // fsync
		i := r.rng.IntN(len(r.fds))
		fd := r.fds[i]
		return both(fmt.Sprintf("fsync(fd %d %s)", fd.id, fd.path), func(root string) (string, error) {
			return "", unix.Fsync(fd.of(root == r.local))
		})
	case op < 63 && len(r.fds) > 0: // dup
		i := r.rng.IntN(len(r.fds))
		fd := r.fds[i]
		l, le := unix.Dup(fd.local)
		m, me := unix.Dup(fd.mnt)
		if le != nil || me != nil {
			return fmt.Sprintf("dup: %v %v", le, me)
		}
		r.fdID++
		r.fds = append(r.fds, fdPair{r.fdID, l, m, fd.flags, fd.path})
		r.log = append(r.log, fmt.Sprintf("dup(fd %d) -> fd %d", fd.id, r.fdID))
	case op < 74: // rename
		from, to := r.anyPath(), r.anyPath()
		return both(fmt.Sprintf("rename(%s, %s)", from, to), func(root string) (string, error) {
			return "", unix.Rename(filepath.Join(root, from), filepath.Join(root, to))
		})
	case op < 80: // unlink
		p := r.filePath()
		return both(fmt.Sprintf("unlink(%s)", p), func(root string) (string, error) {
			return "", unix.Unlink(filepath.Join(root, p))
		})
	case op < 84: // mkdir, rmdir
		d := r.pick(modelDirs[1:])
		if r.rng.IntN(2) == 0 {
			return both(fmt.Sprintf("mkdir(%s)", d), func(root string) (string, error) {
				return "", unix.Mkdir(filepath.Join(root, d), 0o755)
			})
		}
		return both(fmt.Sprintf("rmdir(%s)", d), func(root string) (string, error) {
			return "", unix.Rmdir(filepath.Join(root, d))
		})
	case op < 90: // stat
		p := r.anyPath()
		return both(fmt.Sprintf("stat(%s)", p), func(root string) (string, error) {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(root, p), &st); err != nil {
				return "", err
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return "dir", nil
			}
			return fmt.Sprintf("file %d", st.Size), nil
		})
	case op < 94: // readdir
		d := r.pick(modelDirs)
		return both(fmt.Sprintf("readdir(%s)", d), func(root string) (string, error) {
			ents, err := os.ReadDir(filepath.Join(root, d))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return strings.Join(names, " "), err
		})
	case op < 99: // read a whole file through a new descriptor
		p := r.filePath()
		return both(fmt.Sprintf("readfile(%s)", p), func(root string) (string, error) {
			b, err := os.ReadFile(filepath.Join(root, p))
			return digest(b), err
		})
	default:
		n := 3 // drop_caches, strata sync, strata uploads --retry
		if r.more {
			n = 6 // and truncate by path, fsync of a directory, a restart
		}
		switch r.rng.IntN(n) {
		case 0:
			if r.drop != nil {
				r.log = append(r.log, "drop_caches")
				r.drop()
			}
		case 1:
			return r.onMount("sync")
		case 2:
			return r.onMount("uploads", "--retry")
		case 3: // truncate by path
			p := r.filePath()
			size := r.offset(120000)
			return both(fmt.Sprintf("truncate(%s, %d)", p, size), func(root string) (string, error) {
				return "", unix.Truncate(filepath.Join(root, p), size)
			})
		case 4: // fsync of a directory
			d := r.pick(modelDirs)
			return both(fmt.Sprintf("fsync(dir %s)", d), func(root string) (string, error) {
				fd, err := unix.Open(filepath.Join(root, d), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return "", err
				}
				defer unix.Close(fd)
				return "", unix.Fsync(fd)
			})
		default:
			return r.restartMount()
		}
	}
	return ""
}

// offset returns an offset below limit, or now and then one around the
// cache's 1 MiB block boundary, so that files span two blocks with a hole
// between (sparse in the cache, fetched and uploaded in parts).
func (r *modelRun) offset(limit int) int64 {
	if r.rng.IntN(8) == 0 {
		return 1<<20 - 50000 + int64(r.rng.IntN(100000))
	}
	return int64(r.rng.IntN(limit))
}

// onMount runs `strata ARGS MOUNTPOINT` (no local disk counterpart): it
// must succeed whatever the calls before left open or pending.
func (r *modelRun) onMount(args ...string) string {
	if r.strata == nil {
		return ""
	}
	what := "strata " + strings.Join(args, " ")
	err := r.strata(args...)
	r.log = append(r.log, fmt.Sprintf("%s -> %v", what, err))
	if err != nil {
		return fmt.Sprintf("%s: %v", what, err)
	}
	return ""
}

func (p fdPair) of(local bool) int {
	if local {
		return p.local
	}
	return p.mnt
}

// closeAll closes every descriptor still open, comparing the results.
func (r *modelRun) closeAll() string {
	for len(r.fds) > 0 {
		fd := r.fds[0]
		r.fds = r.fds[1:]
		le, me := unix.Close(fd.local), unix.Close(fd.mnt)
		r.log = append(r.log, fmt.Sprintf("close(%s) -> %v", fd.path, errnoOf(le)))
		if errnoOf(le) != errnoOf(me) {
			return fmt.Sprintf("final close(%s): local disk %v, mount %v", fd.path, errnoOf(le), errnoOf(me))
		}
	}
	return ""
}

func digest(b []byte) string {
	if len(b) < 48 {
		return fmt.Sprintf("%d:%q", len(b), b)
	}
	return fmt.Sprintf("%d:%q…%s", len(b), b[:24], sha(b)[:12])
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
