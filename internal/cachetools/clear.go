package cachetools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/internal/control"
)

// ErrInUse: clear needs the directory to itself.
var ErrInUse = errors.New("cache directory in use")

// Clear empties a cache dir nobody holds: it takes the same lock a
// mount takes, then removes only what strata put there (never the
// directory itself, never strata.log).
func Clear(dir string, force bool) (objects, bytes int64, err error) {
	if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return 0, 0, fmt.Errorf("%s is not a strata cache directory (no index): %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return 0, 0, fmt.Errorf("%w: %s is used by %s; unmount it (or wait for it) first", ErrInUse, dir, cache.LockHolder(dir))
	}
	if staged, _ := os.ReadDir(filepath.Join(dir, "staging")); len(staged) > 0 && !force {
		return 0, 0, fmt.Errorf("%s holds %d staged files (written files not yet uploaded); they would be lost: mount it to let them upload, or use --force", dir, len(staged))
	}
	if ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions()); err == nil {
		// The counts are for the report: a damaged index, which is what
		// a clear is often for, must not stop it.
		_ = ix.ScanBlockUsage(func(_ index.ID, _, b int64) error { objects++; bytes += b; return nil })
		ix.Close()
	}
	for _, name := range []string{"index", "objects", "staging", "session.json", "session.json.tmp", "history.json", "history.json.tmp", control.SockName} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return objects, bytes, fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	return objects, bytes, nil
}
