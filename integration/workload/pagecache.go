package workload

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrNoDrop means the page cache could not be dropped (not root, or
// /proc/sys read-only in a container): measured reads may then come from
// RAM, and reports should say so.
var ErrNoDrop = errors.New("workload: page cache not dropped (needs root and a writable /proc/sys/vm/drop_caches)")

// DropPageCache syncs and drops the page cache, dentries and inodes
// (echo 3 > /proc/sys/vm/drop_caches), as the GKE and DLIO benchmarks do
// between epochs. It returns ErrNoDrop (wrapped) when not permitted.
func DropPageCache() error {
	syscall.Sync()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDrop, err)
	}
	defer f.Close()
	if _, err := f.WriteString("3\n"); err != nil {
		return fmt.Errorf("%w: %v", ErrNoDrop, err)
	}
	return nil
}
