package cachetools

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/internal/config"
)

// OfflineStore opens a cache dir nobody holds for a maintenance command,
// with the block size it was created with. maxBytes 0 keeps 10% of the
// disk free; frozen keeps the LRU order as it is (reading every object
// must not make them all "recently used"). log gets the store's warnings.
func OfflineStore(dir, owner string, maxBytes int64, frozen bool, log *slog.Logger) (*cache.Store, func(), error) {
	bs, ok := BlockSize(dir)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a strata cache directory (no readable index)", dir)
	}
	cfg := config.Defaults()
	eng, err := newEngine(cfg.IOEngine)
	if err != nil {
		return nil, nil, err
	}
	so := cache.DefaultOptions()
	so.BlockSize, so.Engine, so.Owner = bs, eng, owner
	so.Logger = log
	so.MaxBytes, so.MinFree = maxBytes, 0
	if maxBytes == 0 {
		so.MinFree = config.MinFreeFraction
	}
	if frozen {
		so.Clock = frozenClock
	}
	PrivateFiles()
	store, err := cache.Open(dir, so)
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	return store, func() { store.Close(); eng.Close() }, nil
}

// BlockSize is the block size a cache dir was created with, if it
// has been used before. The caller makes sure nobody holds the dir.
func BlockSize(dir string) (int64, bool) {
	if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return 0, false
	}
	ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions())
	if err != nil {
		return 0, false
	}
	defer ix.Close()
	f, ok, err := ix.ReadFormat()
	if err != nil || !ok {
		return 0, false
	}
	return f.BlockSize, true
}

func newEngine(name string) (uring.Engine, error) {
	kind, err := uring.ParseKind(name)
	if err != nil {
		return nil, err
	}
	return uring.New(kind, uring.DefaultOptions())
}

func frozenClock() time.Time { return time.Unix(0, 0) }

// PrivateFiles narrows the process's umask before a cache dir is opened:
// everything created under a cache dir (object files, staging files, and
// the index's own files, whose modes badger does not let us choose) is
// for the owner only, whatever umask the user or the container runtime
// left us. The process creates nothing meant for others afterwards (the
// CSI hand-off socket and directories are chmod'ed explicitly).
func PrivateFiles() { unix.Umask(0o077) }
