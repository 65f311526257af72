package cache

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Disk reports the size and free space of the filesystem holding the
// cache. Tests inject a fake one.
type Disk interface {
	Statfs(path string) (total, avail int64, err error)
}

// RealDisk asks the kernel.
type RealDisk struct{}

// Statfs returns the filesystem's total bytes and the bytes available to
// unprivileged users.
func (RealDisk) Statfs(path string) (int64, int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// limiter turns the size options into a byte limit, re-reading the disk's
// free space at most once per interval (statfs on every block write would
// cost a syscall on the hot path).
type limiter struct {
	dir       string
	disk      Disk
	now       func() time.Time
	maxBytes  int64   // fixed limit, 0 = none
	minFree   float64 // fraction of the filesystem to keep free
	interval  time.Duration
	mu        sync.Mutex
	checked   time.Time
	limit     int64
	lastTotal int64
}

// Limit returns the number of bytes the cache may hold given that it
// holds used bytes now.
func (l *limiter) Limit(used int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.checked.IsZero() && now.Sub(l.checked) < l.interval {
		return l.limit
	}
	l.checked = now
	l.limit = l.compute(used)
	return l.limit
}

// Refresh forgets the cached figure so the next Limit re-reads the disk.
func (l *limiter) Refresh() {
	l.mu.Lock()
	l.checked = time.Time{}
	l.mu.Unlock()
}

// reserveBytes is kept free on the cache filesystem whatever the limits
// say (at most a tenth of it): room for the index and the log to grow.
// Badger writes its memtables through mmap, so a cache that fills the disk
// to the last block kills the mount with SIGBUS instead of getting ENOSPC.
const reserveBytes = 64 << 20

// reserveFor is the reserve on a filesystem of total bytes.
func reserveFor(total int64) int64 { return min(reserveBytes, total/10) }

// stagingFits reports whether n more staged bytes fit on the disk itself.
// With default sizing the tenth of the filesystem kept free is the cache's
// margin, not the writers': a file being written has no other home, so
// staged bytes may use that tenth down to the reserve (and the evictor
// gives it back from cached objects). An explicit --cache-size is the
// user's bound and holds for staged bytes too. Statfs is asked now: this
// is the slow path of a write that did not fit under the limit.
func (l *limiter) stagingFits(n int64) bool {
	if l.maxBytes > 0 {
		return false
	}
	total, avail, err := l.disk.Statfs(l.dir)
	if err != nil {
		return false
	}
	return avail-n >= reserveFor(total)
}

func (l *limiter) compute(used int64) int64 {
	limit := int64(1<<63 - 1)
	if l.maxBytes > 0 {
		limit = l.maxBytes
	}
	total, avail, err := l.disk.Statfs(l.dir)
	if err != nil {
		if l.maxBytes > 0 && l.minFree <= 0 {
			return limit
		}
		return l.limit // keep the previous figure
	}
	l.lastTotal = total
	// What we hold plus what is still free, minus the floor to keep.
	floor := max(int64(l.minFree*float64(total)), reserveFor(total))
	room := used + avail - floor
	return min(limit, max(room, 0))
}
