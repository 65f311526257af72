package mount

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/stratafs/strata/cache"
)

// NewDirs are the directories a command is about to create for its cache
// dir: the cache dir and those of its parents that do not exist yet. A
// command refused before it used the cache (the bucket does not exist,
// the credentials are wrong, the mountpoint is missing) removes them
// again: bad input changes nothing on the disk.
type NewDirs struct {
	cacheDir string
	missing  []string // deepest first
}

// PlanDirs notes which of dir and its ancestors do not exist yet.
func PlanDirs(dir string) NewDirs {
	n := NewDirs{cacheDir: dir}
	if dir == "" {
		return n
	}
	for cur := filepath.Clean(dir); ; cur = filepath.Dir(cur) {
		if _, err := os.Lstat(cur); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		n.missing = append(n.missing, cur)
		if cur == filepath.Dir(cur) {
			break
		}
	}
	return n
}

// Undo removes what PlanDirs found missing: the cache dir with what the
// refused command put in it (LOCK, index, the log of its failure), then
// each parent it created while that is empty. A cache dir some process
// holds (a command started on it meanwhile) is left alone.
func (n NewDirs) Undo() {
	if len(n.missing) == 0 || cache.LockHolder(n.cacheDir) != "" {
		return
	}
	if err := os.RemoveAll(n.missing[0]); err != nil {
		return
	}
	for _, d := range n.missing[1:] {
		if os.Remove(d) != nil {
			return
		}
	}
}
