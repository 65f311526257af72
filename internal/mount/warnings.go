package mount

import (
	"fmt"
	"strings"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/internal/config"
)

// warn logs msg and keeps it for the user: a mount that comes up still
// says, on the terminal that ran it, what looks wrong (Warning).
func (s *Mount) warn(msg string) {
	if msg == "" {
		return
	}
	s.log.Warn(msg)
	s.warnings = append(s.warnings, msg)
}

// Warning is what the user should hear about a mount that did come up
// (its prefix holds no objects, its --cache-size cannot be reached), as
// one line, or "".
func (s *Mount) Warning() string { return strings.Join(s.warnings, "; also: ") }

// cacheSizeWarning says when --cache-size is more than the cache disk can
// give the cache (what it holds now plus the disk's free space). The mount
// goes on: the cache then stops at the disk's last 64 MiB (cache/space.go),
// which is not the tenth of the disk the default keeps free, so a size
// typed with the wrong unit (100TiB for 100GiB) would otherwise fill the
// disk without a word.
func cacheSizeWarning(size config.Size, dir string, used int64) string {
	if size == 0 {
		return ""
	}
	total, avail, err := cache.RealDisk{}.Statfs(dir)
	if err != nil || int64(size) <= used+avail {
		return ""
	}
	return fmt.Sprintf("--cache-size %s is more than the cache disk holds (%s free of %s at %s): the cache will fill that disk "+
		"to its last 64MiB; omit --cache-size to keep a tenth of the disk free", size, config.Size(avail), config.Size(total), dir)
}
