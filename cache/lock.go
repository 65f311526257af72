package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on dir/LOCK. The kernel drops it when
// the process dies, so a crashed mount never leaves the directory locked.
func lockDir(dir, owner string) (*os.File, error) {
	p := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("%w: %s is used by %s", ErrLocked, dir, who)
		}
		return nil, fmt.Errorf("cache: lock %s: %w", p, err)
	}
	_ = f.Truncate(0) // the holder line is for people reading LOCK; the flock is the lock
	fmt.Fprintf(f, "pid %d (%s)\n", os.Getpid(), owner)
	return f, nil
}

// LockHolder reports who holds dir's lock, or "" if nobody does.
func LockHolder(dir string) string {
	p := filepath.Join(dir, "LOCK")
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN) // closing f releases it anyway
		return ""
	}
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

func unlockDir(f *os.File) {
	if f != nil {
		f.Close()
	}
}
